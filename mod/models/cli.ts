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
import { join } from "node:path";
import { type Help, printHelp, usageText } from "../cli/mod.ts";
import { log } from "../log/mod.ts";
import { ConfigEditError } from "../config/mod.ts";
import { ADD_COMPONENTS, AddError } from "./add.ts";
import { addCommand, checkConfiguredFiles } from "./check.ts";
import { runAdd } from "./cli_add.ts";
import { out, type Setup, setup } from "./cli_setup.ts";
import { downloadModelFiles } from "./download.ts";
import { HostUnreachableError } from "./fetch_failure.ts";
import {
  LockError,
  MODEL_COMPONENTS,
  type ModelComponent,
  parseComponentList,
  readLock,
} from "./lock.ts";
import { neededFiles } from "./required.ts";
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
      return await runAdd(rest[0], v, signal);
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
