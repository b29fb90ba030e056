/**
 * The `add` subcommand of `deno task models`: an own ONNX export or
 * component, a checkpoint, diffusers folder or VAE to convert, a LoRA or a
 * textual-inversion embedding, each locked into `models.local.lock`, and the
 * config lines that use it printed or written into `config.local.toml` (for
 * a LoRA and an embedding: the user's own list plus the new entry).
 *
 * @module
 */

import { parse as parseToml } from "smol-toml";
import { isAbsolute, join, resolve } from "node:path";
import { log } from "../log/mod.ts";
import {
  type ConfigEdit,
  editConfigText,
  localOverlayPath,
  readWrittenConfig,
} from "../config/mod.ts";
import { ADD_COMPONENTS, type AddComponent, AddError, addModels, tomlString } from "./add.ts";
import { embeddingsEdit } from "./add_embedding.ts";
import { addCheckpoint, type AddSource, detectSource, writeOutcome } from "./add_checkpoint.ts";
import { CheckpointError } from "../checkpoint/mod.ts";
import { out, setup } from "./cli_setup.ts";
import { writeAtomically } from "./lock_write.ts";
import { toLockPath } from "./required.ts";

/**
 * `deno task models add PATH`: an ONNX export or component is locked
 * (add.ts), a checkpoint, diffusers folder or VAE is converted and locked
 * (add_checkpoint.ts), a LoRA or an embedding goes into the user's list; the
 * config lines are printed, or written into `config.local.toml` with
 * `--write-config`. Returns the exit status (1 a refused file, 2 a bad flag);
 * lock, config and interruption errors are thrown for `main` to report.
 */
export async function runAdd(
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
export interface AddFlags {
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
