/**
 * `deno task models` — the model files of a configuration.
 *
 * - `deno task models [--config PATH] [--lock PATH] [--root DIR] [--only C1,C2] [--all]`
 *   downloads what the configuration needs (exactly the files its keys name,
 *   see `neededFiles`) and is missing or wrong, and verifies it; local lock
 *   entries (no `url`) are only verified. `--all`: every lock entry instead.
 *   Then it builds the `[[derived]]` folders the configuration needs (the fp32
 *   set, the ONNX TAESD decoder) and the LoRA-merged models (`merged.ts`).
 *   A host that cannot be reached ends the run at once with one line.
 * - `deno task models check [--config PATH] [--lock PATH] [--root DIR]` prints
 *   each needed file with ok / missing / wrong size / wrong hash / not locked /
 *   not built / stale (derived files: made here from pinned inputs).
 * - `deno task models add [--component C] [--write-config] [--config PATH]
 *   [--lock PATH] [--root DIR] PATH` locks an own export into the lock's
 *   `models.local.lock` (see add.ts) and prints the config lines to use, or
 *   sets them in the config's `config.local.toml` with `--write-config`: the
 *   user's own files, which git does not track, so `git pull` never conflicts.
 *   For a LoRA, `[lora] files` is what the user wrote plus the new entry, never
 *   the resolved list (the fast preset adds its LCM LoRA to that by itself); for a
 *   textual-inversion embedding, `[prompt] embeddings` likewise.
 *
 * The config is `--config`, else `$SD_MCP_CONFIG`, else `./config.toml` when
 * it exists, else the defaults (root `./models`, lock `./models.lock`);
 * `--lock` / `--root` override it. Exit status: 0 all good, 1 some file
 * failed or is not ok, 2 usage, lock or config error (a LoRA listed twice
 * among them), 130 interrupted by SIGINT or SIGTERM (partial downloads are
 * kept for resuming; a conversion or merge in progress is removed).
 *
 * @module
 */

import { parseArgs } from "node:util";
import { parse as parseToml } from "smol-toml";
import { isAbsolute, join, resolve } from "node:path";
import { type Help, printHelp, usageText } from "../cli/mod.ts";
import { log } from "../log/mod.ts";
import {
  type ConfigEdit,
  ConfigEditError,
  defaultConfigPath,
  editConfigText,
  loadConfig,
  localOverlayPath,
  readWrittenConfig,
  type ResolvedConfig,
} from "../config/mod.ts";
import { ADD_COMPONENTS, type AddComponent, AddError, addModels, tomlString } from "./add.ts";
import { embeddingsEdit } from "./add_embedding.ts";
import { addCheckpoint, type AddSource, detectSource, writeOutcome } from "./add_checkpoint.ts";
import { CheckpointError } from "../checkpoint/mod.ts";
import { addCommand, checkConfiguredFiles, type CheckedConfig } from "./check.ts";
import { downloadModelFiles } from "./download.ts";
import { HostUnreachableError } from "./fetch_failure.ts";
import {
  LockError,
  MODEL_COMPONENTS,
  type ModelComponent,
  parseComponentList,
  readLock,
} from "./lock.ts";
import { writeAtomically } from "./lock_write.ts";
import { neededFiles, toLockPath } from "./required.ts";
import { assertLorasListedOnce, type LoraListEntry, RepeatedLoraError } from "../lora/mod.ts";
import { buildDerivedFiles } from "./startup.ts";
import { removeUnfinishedBuilds } from "./unfinished.ts";
import { checkMergedModels, prepareMergedModels } from "./merged.ts";

const HELP: Help = {
  usage: [
    "deno task models [--config PATH] [--lock PATH] [--root DIR] [--only C1,C2] [--all]",
    "deno task models check [--config PATH] [--lock PATH] [--root DIR]",
    "deno task models add [--component COMPONENT] [--write-config] [--config PATH] " +
    "[--lock PATH] [--root DIR] PATH",
    "deno task models add [--component vae] [--ema] [--precision fp32|fp16|both] " +
    "[--write-config] [--config PATH] [--lock PATH] [--root DIR] CHECKPOINT",
  ],
  summary: "The model files of a configuration. Without a command: downloads the files the " +
    "config needs that are missing or wrong (resumable, sha256-verified against models.lock) " +
    "and verifies them; local files (no url in the lock) are only verified; then builds the " +
    "derived files the config needs from them ([[derived]] in models.lock: the fp32 set, the " +
    "ONNX TAESD decoder) and the LoRA-merged models (the fast preset's LCM LoRA, [lora] files). " +
    "`check` lists each needed file as ok, missing, wrong size, wrong hash, not locked, not " +
    "built or stale, and each LoRA-merged model, building nothing. `add PATH` checks an own " +
    "ONNX export (a diffusers-layout folder, or with --component one file) against the model " +
    "contract, hashes it and locks it in models.local.lock beside models.lock. `add CHECKPOINT` " +
    "converts an SD 1.x checkpoint (.safetensors, .ckpt, .pt, .bin; pickle is never run) or a " +
    "diffusers folder (model_index.json), or with --component vae a standalone VAE, into the " +
    "ONNX set the server runs, under converted/ in the models root, and locks it as a derived " +
    "set of its input (a second add of the same file converts nothing).",
  options: [
    [
      "--config PATH",
      "config file (default: $SD_MCP_CONFIG, else ./config.toml when present, else the " +
      "defaults); its <name>.local.toml is read over it",
    ],
    ["--lock PATH", "the models.lock to use instead of [models] lock (its .local.lock too)"],
    ["--root DIR", "the models root instead of [models] root (lock paths are relative to it)"],
    [
      "--only C1,C2",
      "download: only these components (" + MODEL_COMPONENTS.join(", ") + ")",
    ],
    ["--all", "download: every lock entry, not only the files the config needs"],
    [
      "--component C",
      "add: one file of this component instead of a whole folder (" +
      ADD_COMPONENTS.join(", ") + "), or vae: a standalone VAE file or folder, converted " +
      "([models] vae)",
    ],
    [
      "--ema",
      "add CHECKPOINT: convert the checkpoint's EMA UNet weights (default: the trained ones)",
    ],
    [
      "--precision P",
      "add CHECKPOINT: fp32, fp16 or both (default: fp32 for execution_provider cpu, fp16 for " +
      "cuda and webgpu; the config is pointed at that one)",
    ],
    [
      "--write-config",
      "add: set the config keys that name it in the config's <name>.local.toml (read over the " +
      "config, ignored by git) instead of printing them",
    ],
    ["-h, --help", "print this help and exit"],
  ],
  notes: [
    "Downloads use HTTPS_PROXY / HTTP_PROXY when set and reach the hosts in NO_PROXY directly. " +
    "Exit status: 0 all good, 1 some file failed or is not ok, 2 a usage, lock or config " +
    "mistake (a LoRA listed twice among them), 130 interrupted (SIGINT or SIGTERM: partial " +
    "downloads are kept and resumed; a conversion or merge in progress is removed).",
  ],
};

const encoder = new TextEncoder();

/** The command's report (stdout; logs and progress go to stderr). */
function out(line: string): void {
  Deno.stdout.writeSync(encoder.encode(line + "\n"));
}

/** The model part of the config, with `--root` / `--lock` applied. */
interface Setup {
  config: CheckedConfig & Pick<ResolvedConfig, "lora" | "prompt">;
  configPath: string | undefined;
  lora: ResolvedConfig["lora"];
  /** The resolved `[generation] preset` (which may add a LoRA of its own). */
  preset: ResolvedConfig["generation"]["preset"];
  /** `[runtime] execution_provider`: the precision a converted set gets by default. */
  provider: ResolvedConfig["runtime"]["executionProvider"];
}

/** Moves every configured path from the config's root to `root` (the `--root` override). */
function rebase(
  config: ResolvedConfig,
  root: string,
): CheckedConfig & Pick<ResolvedConfig, "lora" | "prompt"> {
  const from = config.models.root;
  const move = (p: string) => join(root, toLockPath(p, from));
  const cn = config.controlnet;
  return {
    models: {
      root,
      lock: config.models.lock,
      base: move(config.models.base),
      controlnetUnet: move(config.models.controlnetUnet),
      vaeDecoder: config.models.vaeDecoder,
      tinyVaeDecoder: move(config.models.tinyVaeDecoder),
      vae: config.models.vae ? move(config.models.vae) : null,
    },
    controlnet: {
      depth: {
        enabled: cn.depth.enabled,
        model: move(cn.depth.model),
        preprocessor: move(cn.depth.preprocessor),
      },
      openpose: {
        enabled: cn.openpose.enabled,
        model: move(cn.openpose.model),
        detector: move(cn.openpose.detector),
        estimator: move(cn.openpose.estimator),
      },
      inpaint: { enabled: cn.inpaint.enabled, model: move(cn.inpaint.model) },
    },
    lora: { files: config.lora.files.map((f) => ({ ...f, path: move(f.path) })) },
    prompt: {
      ...config.prompt,
      embeddings: config.prompt.embeddings.map((e) => ({ ...e, path: move(e.path) })),
    },
  };
}

async function setup(v: { config?: string; lock?: string; root?: string }): Promise<Setup> {
  const configPath = v.config ?? await defaultConfigPath();
  // stdio: the HTTP secrets are irrelevant to model files.
  const config = await loadConfig({ path: configPath, overrides: { transport: "stdio" } });
  const models = rebase(config, v.root !== undefined ? resolve(v.root) : config.models.root);
  if (v.lock !== undefined) models.models.lock = resolve(v.lock);
  return {
    config: models,
    configPath,
    lora: models.lora,
    preset: config.generation.preset,
    provider: config.runtime.executionProvider,
  };
}

/** Runs the command with `args`; returns the process exit status. */
export async function main(args: string[], signal?: AbortSignal): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args,
      options: {
        config: { type: "string" },
        lock: { type: "string" },
        root: { type: "string" },
        only: { type: "string" },
        all: { type: "boolean" },
        component: { type: "string" },
        "write-config": { type: "boolean" },
        ema: { type: "boolean" },
        precision: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
      strict: true,
      allowPositionals: true,
    });
  } catch (e) {
    log("error", "models", `${(e as Error).message}\n${usageText(HELP)}`);
    return 2;
  }
  const v = parsed.values;
  if (v.help) return printHelp(HELP);
  const [command, ...rest] = parsed.positionals;
  const usage = (problem: string) => {
    log("error", "models", `${problem}\n${usageText(HELP)}`);
    return 2;
  };
  const addOnly = v.component !== undefined || v["write-config"] || v.ema ||
    v.precision !== undefined;
  const downloadOnly = v.only !== undefined || v.all;
  try {
    if (command === undefined) {
      if (addOnly) {
        return usage("--component, --write-config, --ema and --precision belong to `models add`");
      }
      return await download(v, signal);
    }
    if (command === "check") {
      if (rest.length > 0 || addOnly || downloadOnly) return usage("`models check` takes no PATH");
      return await check(v);
    }
    if (command === "add") {
      if (rest.length !== 1) return usage("`models add` takes exactly one PATH");
      if (downloadOnly) return usage("--only and --all belong to the download");
      return await add(rest[0], v, signal);
    }
    return usage(`unknown command "${command}"`);
  } catch (e) {
    if (signal?.aborted) {
      log(
        "warn",
        "models",
        command === "add"
          ? "interrupted; nothing was written (a conversion in progress is removed)"
          : "interrupted; run `deno task models` again to resume",
      );
      return 130;
    }
    if (e instanceof HostUnreachableError) {
      log("error", "models", e.message);
      return 1;
    }
    if (
      e instanceof LockError || e instanceof AddError || e instanceof ConfigEditError ||
      e instanceof RepeatedLoraError || (e as Error).name === "ConfigError"
    ) {
      log("error", "models", (e as Error).message);
      return 2;
    }
    throw e;
  }
}

async function download(
  v: { config?: string; lock?: string; root?: string; only?: string; all?: boolean },
  signal?: AbortSignal,
): Promise<number> {
  const only: ModelComponent[] = v.only !== undefined ? parseComponentList(v.only) : [];
  const { config } = await setup(v);
  const { root, lock } = config.models;
  const { files: all, derived } = await readLock(lock);
  // A LoRA listed twice is refused before anything is fetched or merged.
  await assertLorasOnce(config.lora.files, root, all);
  let entries;
  let localFailures: string[] = [];
  if (v.all) {
    entries = all;
  } else {
    const needed = neededFiles(config, all, derived);
    const unlocked = needed.files.filter((f) => !f.entry && !f.derived);
    if (unlocked.length > 0 || needed.outside.length > 0) {
      throw new LockError(
        [
          ...needed.outside,
          ...unlocked.map((f) =>
            `${f.path} (${f.key}) is not in ${lock}; lock what is there with \`${
              addCommand(f, root)
            }\``
          ),
        ].join("\n"),
      );
    }
    // Files already right need no network; local entries (no url) are never downloaded.
    const state = await checkConfiguredFiles(config);
    // Derived files are built after the downloads, not downloaded.
    const wanted = state.files.filter((f) =>
      f.entry !== undefined && (only.length === 0 || only.includes(f.entry.component))
    );
    localFailures = wanted.filter((f) => f.state !== "ok" && f.entry!.url === undefined)
      .map((f) => `${f.path} (${f.key}): ${f.detail}`);
    entries = wanted.filter((f) => f.state !== "ok" && f.entry!.url !== undefined)
      .map((f) => f.entry!);
    const present = wanted.length - entries.length - localFailures.length;
    if (present > 0) log("info", "models", "already present and verified", { files: present });
  }
  if (only.length > 0) entries = entries.filter((e) => only.includes(e.component));
  for (const line of localFailures) log("error", "models", line);
  if (entries.length === 0) {
    if (localFailures.length > 0) return 1;
    await buildDerived(config, signal);
    log("info", "models", "all model files the configuration needs are present and verified", {
      lock,
    });
    return 0;
  }
  const total = entries.reduce((n, e) => n + e.size, 0);
  log("info", "models", "checking model files", {
    root,
    lock,
    files: entries.length,
    bytes: total,
  });
  const report = await downloadModelFiles({ root, entries, signal });
  const failed = report.failed.length + localFailures.length;
  if (failed > 0) {
    for (const f of report.failed) log("error", "models", `${f.path}: ${f.error}`);
    log("error", "models", `${failed} of ${entries.length + localFailures.length} files failed`);
    return 1;
  }
  await buildDerived(config, signal);
  log("info", "models", "all model files present and verified", { files: entries.length });
  return 0;
}

/**
 * Builds the derived files the configuration needs whose inputs are now in
 * place, and the LoRA-merged models (so the first start merges nothing).
 */
async function buildDerived(config: Setup["config"], signal?: AbortSignal): Promise<void> {
  const check = await checkConfiguredFiles(config);
  const built = await buildDerivedFiles(config, check, { signal });
  if (built > 0) log("info", "models", "derived model files built", { folders: built });
  if (check.files.some((f) => f.state !== "ok" && !f.derived)) return;
  const merged = await prepareMergedModels(config, { signal });
  if (merged) log("info", "models", "LoRA-merged models in place", { models: Object.keys(merged) });
}

/** Refuses a LoRA listed twice in the resolved list (by path, file or the sha256 `entries` pin). */
async function assertLorasOnce(
  files: readonly LoraListEntry[],
  root: string,
  entries: ReadonlyArray<{ path: string; sha256: string }>,
): Promise<void> {
  const pinned = new Map(entries.map((e) => [join(root, ...e.path.split("/")), e.sha256]));
  await assertLorasListedOnce(files, { root, sha256Of: (path) => pinned.get(path) });
}

async function check(v: { config?: string; lock?: string; root?: string }): Promise<number> {
  const { config } = await setup(v);
  const result = await checkConfiguredFiles(config, { progress: {} });
  const width = Math.max(...result.files.map((f) => f.state.length), 2);
  let repeated: string[] = [];
  try {
    await assertLorasOnce(
      config.lora.files,
      config.models.root,
      (await readLock(config.models.lock)).files,
    );
  } catch (e) {
    if (!(e instanceof RepeatedLoraError)) throw e;
    repeated = e.message.split("\n");
  }
  for (const line of repeated) out(`${"repeated".padEnd(width)}  ${line}`);
  for (const line of result.outside) out(`${"outside".padEnd(width)}  ${line}`);
  for (const f of result.files) {
    const made = f.derived && !f.detail
      ? `  (made here by ${f.derived.converter} from ${f.derived.from.join(", ")})`
      : "";
    out(`${f.state.padEnd(width)}  ${f.path}${f.detail ? `  (${f.key}: ${f.detail})` : made}`);
  }
  const merged = await checkMergedModels(config);
  for (const m of merged) {
    out(`${m.state.padEnd(width)}  ${m.folder}/  (LoRA-merged ${m.model}: ${m.detail})`);
  }
  const bad = result.files.filter((f) => f.state !== "ok").length + result.outside.length +
    merged.filter((m) => m.state !== "ok").length + (repeated.length > 0 ? 1 : 0);
  out(
    `${
      result.files.length + merged.length
    } files needed by the configuration (models root ${config.models.root}, ` +
      `lock ${config.models.lock}): ${bad === 0 ? "all ok" : `${bad} not ok`}` +
      (result.hashed.length > 0 ? `; ${result.hashed.length} hashed` : ""),
  );
  return bad === 0 ? 0 : 1;
}

async function add(
  target: string,
  v: AddFlags,
  signal?: AbortSignal,
): Promise<number> {
  let component: AddComponent | undefined;
  if (v.component !== undefined && v.component !== "vae") {
    if (!(ADD_COMPONENTS as readonly string[]).includes(v.component)) {
      log(
        "error",
        "models",
        `--component must be one of vae, ${ADD_COMPONENTS.join(", ")} (a base set is added as ` +
          `a folder or a checkpoint file, without --component), got "${v.component}"`,
      );
      return 2;
    }
    component = v.component as AddComponent;
  }
  if (
    v.precision !== undefined && v.precision !== "fp32" && v.precision !== "fp16" &&
    v.precision !== "both"
  ) {
    log("error", "models", `--precision must be fp32, fp16 or both, got "${v.precision}"`);
    return 2;
  }
  if (component === undefined) {
    let source;
    try {
      source = await detectSource(resolve(target), v.component === "vae");
    } catch (e) {
      if (!(e instanceof AddError)) throw e;
      log("error", "models", e.message);
      return 1;
    }
    if (source.kind !== "onnx") return await addConverted(target, source, v, signal);
  }
  if (v.ema || v.precision !== undefined) {
    log(
      "error",
      "models",
      "--ema and --precision apply to a checkpoint, diffusers folder or VAE that is converted; " +
        `${target} is an ONNX export, added as it is`,
    );
    return 2;
  }
  const { config, configPath, lora, preset } = await setup(v);
  const result = await addModels({
    target,
    component,
    root: config.models.root,
    lock: config.models.lock,
  });
  log(
    "info",
    "models",
    `locked ${result.entries.length} files under ${result.lockPath}` +
      (result.check.flavour ? ` (${result.check.flavour})` : ""),
    {
      lock: config.models.lock,
      replaced: result.replaced,
      hashed: result.hashed,
      fromCache: result.cached,
      ...(result.check.ignored.length > 0 ? { notUsed: result.check.ignored } : {}),
    },
  );
  let edits = result.edits;
  if (component === "lora") {
    const plan = await loraFilesEdit(
      configPath,
      config.models.root,
      lora.files,
      preset,
      result.lockPath,
    );
    for (const line of plan.warnings) log("warn", "models", line);
    if (plan.edit === undefined) return 0;
    edits = [plan.edit];
  }
  if (component === "embedding") {
    edits = [await embeddingsEdit(configPath, config.models.root, result.lockPath)];
  }
  // The user's settings go to the config's local overlay, which git does not track.
  const path = configPath !== undefined ? localOverlayPath(configPath) : "config.toml";
  let text = "";
  try {
    text = await Deno.readTextFile(path);
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  if (v["write-config"]) {
    await writeAtomically(path, editConfigText(text, edits));
    for (const line of configLines(edits)) log("info", "models", `set in ${path}: ${line}`);
  } else {
    for (const line of snippet(path, text, edits)) out(line);
  }
  if (
    component !== undefined && component !== "lora" && component !== "controlnet_unet" &&
    component !== "tiny_vae_decoder" && component !== "embedding"
  ) {
    log(
      "info",
      "models",
      "enable the feature that uses it in the config ([controlnet.*] enabled = true)",
    );
  }
  return 0;
}

/** The flags `models add` reads. */
interface AddFlags {
  config?: string;
  lock?: string;
  root?: string;
  component?: string;
  "write-config"?: boolean;
  ema?: boolean;
  precision?: string;
}

/**
 * `models add` of a checkpoint, diffusers folder or VAE: converted and
 * locked (add_checkpoint.ts); a refusal is one line and exit status 1.
 */
async function addConverted(
  target: string,
  source: Exclude<AddSource, { kind: "onnx" }>,
  v: AddFlags,
  signal?: AbortSignal,
): Promise<number> {
  if (v.ema && source.kind === "vae") {
    log("error", "models", "--ema applies to a checkpoint's UNet, not to a VAE");
    return 2;
  }
  const { config, configPath, provider } = await setup(v);
  // The provider's precision first: the config is pointed at it.
  const native = provider === "cpu" ? "fp32" : "fp16";
  const precisions: Array<"fp32" | "fp16"> = v.precision === "both"
    ? [native, native === "fp32" ? "fp16" : "fp32"]
    : [(v.precision as "fp32" | "fp16" | undefined) ?? native];
  const hold = Number(Deno.env.get(HOLD_ENV) ?? "");
  let result;
  try {
    result = await addCheckpoint({
      target,
      source,
      root: config.models.root,
      lock: config.models.lock,
      precisions,
      ema: v.ema,
      signal,
      ...(Number.isFinite(hold) && hold > 0 ? { holdMs: hold } : {}),
    });
  } catch (e) {
    if (signal?.aborted) throw e;
    if (e instanceof CheckpointError || e instanceof AddError) {
      log("error", "models", oneLine(e.message));
      return 1;
    }
    // A conversion that failed midway left nothing behind (add_checkpoint.ts): say so in one line.
    log(
      "error",
      "models",
      `${target}: the conversion failed: ${oneLine((e as Error).message)}; nothing was written`,
    );
    return 1;
  }
  const path = configPath !== undefined ? localOverlayPath(configPath) : "config.toml";
  let text = "";
  try {
    text = await Deno.readTextFile(path);
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  const newText = v["write-config"] ? editConfigText(text, result.edits) : text;
  // Synchronously after this check: a signal finds nothing or everything written.
  if (signal?.aborted) {
    for (const s of result.sets.filter((s) => s.converted)) {
      await Deno.remove(join(config.models.root, ...s.path.split("/")), { recursive: true })
        .catch(() => {});
    }
    signal.throwIfAborted();
  }
  const wrote = writeOutcome(result, { path, text, newText });
  await result.saveCache();
  for (const s of result.sets) {
    log(
      "info",
      "models",
      s.converted
        ? `converted ${toLockPath(resolve(target), config.models.root)} into ${s.path} ` +
          `(${s.precision}, ${s.bytes.toLocaleString("en-US")} bytes)`
        : `${s.path} already holds this conversion (${s.precision}); nothing converted`,
    );
  }
  if (result.ignored.count > 0) {
    log(
      "info",
      "models",
      `ignored ${result.ignored.count} keys the conversion does not use: ` +
        result.ignored.prefixes.join(", "),
    );
  }
  if (wrote.lock) {
    log("info", "models", `locked ${result.inputs.length} input files and the converted set`, {
      lock: result.lockFile,
    });
  }
  if (v["write-config"]) {
    for (const line of configLines(result.edits)) {
      log("info", "models", `${wrote.config ? "set" : "already set"} in ${path}: ${line}`);
    }
  } else {
    for (const line of snippet(path, text, result.edits)) out(line);
  }
  if (!wrote.lock && !wrote.config && result.sets.every((s) => !s.converted)) {
    log("info", "models", "already converted, locked and configured: nothing was written");
  }
  const written = await readWrittenConfig(configPath);
  if (
    source.kind === "vae" &&
    (written.models as { vae_decoder?: string } | undefined)?.vae_decoder === "tiny"
  ) {
    log(
      "info",
      "models",
      'images are decoded by the tiny decoder while [models] vae_decoder = "tiny" is set; ' +
        "the VAE encodes (image-to-image, inpainting, upscale)",
    );
  }
  return 0;
}

/** The environment variable of the test hook that holds a finished conversion (add_checkpoint.ts). */
const HOLD_ENV = "SD_MCP_TEST_HOLD_CONVERSION_MS";

/** A message as one line (a refusal is one line). */
function oneLine(message: string): string {
  return message.split("\n").map((l) => l.trim()).filter((l) => l !== "").join("; ");
}

/** A TOML float for a LoRA weight: `1.0`, `0.75` (never rounded). */
function tomlWeight(weight: number): string {
  return Number.isInteger(weight) ? weight.toFixed(1) : String(weight);
}

/**
 * The `[lora] files` edit that adds `added` (a lock path under `root`): the
 * entries the user wrote (config.toml with its config.local.toml over it;
 * never the resolved list, to which a preset appends its own LoRA) as they
 * wrote them, plus the new one at weight 1.0. An entry for the same file
 * stays where it is, with its weight. No edit when `added` is a LoRA the
 * preset merges by itself (listing it too would merge it twice), and a
 * warning for each such LoRA the user's own list already names.
 *
 * @param resolved the resolved `[lora] files` (absolute paths under `root`):
 *   the user's entries and what the preset adds
 */
async function loraFilesEdit(
  configPath: string | undefined,
  root: string,
  resolved: ReadonlyArray<{ path: string }>,
  preset: string,
  added: string,
): Promise<{ edit?: ConfigEdit; warnings: string[] }> {
  const own = writtenLoraFiles(await readWrittenConfig(configPath));
  // Written paths are relative to the models root (or absolute); compare them as lock paths.
  const key = (p: string) => toLockPath(isAbsolute(p) ? p : join(root, p), root);
  // What the resolved list holds beyond the user's entries is the preset's.
  const extra = new Map<string, number>();
  for (const r of resolved) extra.set(key(r.path), (extra.get(key(r.path)) ?? 0) + 1);
  for (const f of own) extra.set(key(f.path), (extra.get(key(f.path)) ?? 0) - 1);
  const presetAdds = new Set([...extra].filter(([, n]) => n > 0).map(([p]) => p));
  const warnings = own.filter((f) => presetAdds.has(key(f.path))).map((f) =>
    `[lora] files lists ${f.path}, which the ${preset} preset merges by itself: the server ` +
    "refuses a LoRA listed twice; remove that entry from [lora] files"
  );
  if (presetAdds.has(added)) {
    warnings.push(
      `${added} is the LoRA the ${preset} preset merges by itself: it needs no [lora] files ` +
        "entry (it would be merged twice); it is locked, and the config is left as it is",
    );
    return { warnings };
  }
  const files = own.some((f) => key(f.path) === added) ? own : [...own, { path: added, weight: 1 }];
  const value = `[${
    files.map((f) => `{ path = ${tomlString(f.path)}, weight = ${tomlWeight(f.weight)} }`)
      .join(", ")
  }]`;
  return { edit: { section: "lora", key: "files", value }, warnings };
}

/** `[lora] files` as the user wrote it (`weight` defaults to 1.0, as in the config schema). */
function writtenLoraFiles(written: Record<string, unknown>): { path: string; weight: number }[] {
  const files = (written.lora as { files?: unknown } | undefined)?.files;
  if (!Array.isArray(files)) return [];
  return files.map((f: { path: string; weight?: number }) => ({
    path: f.path,
    weight: f.weight ?? 1,
  }));
}

function configLines(edits: readonly ConfigEdit[]): string[] {
  return edits.map((e) => `[${e.section}] ${e.key} = ${e.value}`);
}

/**
 * What to paste into `path` (its text now: `text`) without --write-config:
 * whole tables when appending them keeps the file valid TOML, else (the
 * file already has one of the tables) comment lines naming each key.
 */
function snippet(path: string, text: string, edits: readonly ConfigEdit[]): string[] {
  const tables = groupedLines(edits);
  const hint = path.endsWith(".local.toml")
    ? " (it is read over the config and git does not track it)"
    : "";
  try {
    parseToml(`${text}\n${tables.join("\n")}\n`);
    return [`# append these lines to ${path}${hint}, or rerun with --write-config:`, ...tables];
  } catch {
    return [
      `# ${path} already has these tables: rerun with --write-config, or set these keys in it:`,
      ...configLines(edits).map((line) => `#   ${line}`),
    ];
  }
}

function groupedLines(edits: readonly ConfigEdit[]): string[] {
  const lines: string[] = [];
  let section: string | undefined;
  for (const e of edits) {
    if (e.section !== section) {
      lines.push(`[${e.section}]`);
      section = e.section;
    }
    lines.push(`${e.key} = ${e.value}`);
  }
  return lines;
}

if (import.meta.main) {
  const controller = new AbortController();
  const onSignal = () => controller.abort(new Error("interrupted"));
  Deno.addSignalListener("SIGINT", onSignal);
  Deno.addSignalListener("SIGTERM", onSignal);
  const code = await main(Deno.args, controller.signal);
  Deno.removeSignalListener("SIGINT", onSignal);
  Deno.removeSignalListener("SIGTERM", onSignal);
  // A build the signal abandoned may still be writing into its scratch folder.
  removeUnfinishedBuilds();
  Deno.exit(code);
}
