/**
 * `deno task models add` for the models people have: a single-file SD 1.x
 * checkpoint (`.safetensors`, `.ckpt`, `.pt`, `.bin`), a diffusers folder
 * (`model_index.json`) or, with `--component vae`, a standalone VAE (a
 * file, or a diffusers `AutoencoderKL` folder). In order:
 *
 * 1. the input is opened and checked by `mod/checkpoint` (SD 2.x, SDXL, an
 *    inpainting UNet, a LoRA or embedding, a truncated file, an unknown
 *    dtype are refused with one line) — before anything is written;
 * 2. its files are hashed (the verification cache spares a second hash) and
 *    become local `[[file]]` entries; the set it converts to is a
 *    `[[derived]]` folder under `converted/`, keyed like every derived folder
 *    by its recipe: the converter and its version, the inputs' sha256 and the
 *    options (precision, EMA). A folder already holding that recipe's files
 *    is reused: nothing is converted or written;
 * 3. the conversion (`checkpoint_set.ts`) writes into a scratch folder that
 *    is recorded and renamed into place only when complete (`derived.ts`);
 * 4. then, in one synchronous step no signal handler can interrupt, the
 *    entries go to the lock's `models.local.lock` and (with
 *    `--write-config`) the config keys to `config.local.toml`.
 *
 * A failure or a stop (SIGINT, SIGTERM) before step 4 leaves the models root
 * as it was: the scratch folder is removed (`unfinished.ts`), a folder
 * converted by this run is removed again, and no lock or config file was
 * touched.
 *
 * @module
 */

import { basename, dirname, extname, join, resolve } from "node:path";
import { openSd15Checkpoint, openVaeWeights } from "../checkpoint/mod.ts";
import type { ConfigEdit } from "../config/mod.ts";
import { localOverlayPath } from "../config/mod.ts";
import { log } from "../log/mod.ts";
import { AddError, tomlString } from "./add.ts";
import {
  CHECKPOINT_CONVERTER,
  CHECKPOINT_EXTENSIONS,
  runSetConversion,
  type SetOptions,
  VAE_CONVERTER,
} from "./checkpoint_set.ts";
import { checkDerived, ensureDerived, recipeKey } from "./derived.ts";
import { lockRecipe } from "./derived_lock.ts";
import { type DerivedEntry, type LockEntry, type ModelComponent, readLock } from "./lock.ts";
import { updateLockText } from "./lock_write.ts";
import { ProgressLine, type ProgressOptions } from "./progress.ts";
import { toLockPath } from "./required.ts";
import { sha256File } from "../bytes/mod.ts";
import { cachedSha256, loadVerifyCache, saveVerifyCache } from "./verify_cache.ts";

/** Where converted sets go, under the models root. */
export const CONVERTED_DIR = "converted";

/** What a path given to `models add` is. */
export type AddSource =
  | { kind: "onnx" }
  | { kind: "checkpoint"; folder: boolean }
  | { kind: "vae"; folder: boolean };

/**
 * What `target` is: an ONNX export (today's `models add`), a checkpoint
 * file or diffusers folder, or (with `vae`) a standalone VAE.
 *
 * @throws AddError naming what was found and what is accepted
 */
export async function detectSource(target: string, vae: boolean): Promise<AddSource> {
  let stat: Deno.FileInfo;
  try {
    stat = await Deno.stat(target);
  } catch {
    throw new AddError(`${target} does not exist`);
  }
  const has = (name: string) => Deno.stat(join(target, name)).then(() => true, () => false);
  if (stat.isDirectory) {
    if (vae) {
      if (await has("config.json")) return { kind: "vae", folder: true };
      if (await has("vae/config.json")) {
        throw new AddError(
          `${target} is a diffusers pipeline folder: give its VAE folder, ${join(target, "vae")}`,
        );
      }
      throw new AddError(
        `${target}: a VAE folder needs a diffusers AutoencoderKL config.json beside its weights; ` +
          `or give the VAE file (${CHECKPOINT_EXTENSIONS.join(", ")})`,
      );
    }
    if (await has("model_index.json")) {
      if (await has("unet/model.onnx")) return { kind: "onnx" };
      return { kind: "checkpoint", folder: true };
    }
    return { kind: "onnx" };
  }
  const ext = extname(target).toLowerCase();
  if (CHECKPOINT_EXTENSIONS.includes(ext)) {
    return { kind: vae ? "vae" : "checkpoint", folder: false };
  }
  if (vae) {
    throw new AddError(
      `${target}: a VAE is a ${CHECKPOINT_EXTENSIONS.join(", ")} file or a diffusers VAE folder, ` +
        `not a ${ext || "file without extension"}`,
    );
  }
  throw new AddError(
    `${target}: \`models add\` takes an SD 1.x checkpoint (${CHECKPOINT_EXTENSIONS.join(", ")}), ` +
      "a diffusers folder (model_index.json) or an ONNX export folder; a single ONNX file needs " +
      "--component",
  );
}

/** What to convert and lock. */
export interface AddCheckpointOptions {
  /** The checkpoint file, diffusers folder or VAE. */
  target: string;
  /** What it is ({@link detectSource}). */
  source: Exclude<AddSource, { kind: "onnx" }>;
  /** The models root. */
  root: string;
  /** The models.lock in use (entries go to its overlay). */
  lock: string;
  /** Precisions to write, the first being the one the config is pointed at. */
  precisions: ReadonlyArray<"fp32" | "fp16">;
  /** The EMA UNet weights. */
  ema?: boolean;
  /** Stops the conversion; nothing is left behind. */
  signal?: AbortSignal;
  /** Progress lines (hashing), or false. */
  progress?: ProgressOptions | false;
  /**
   * Test hook (`SD_MCP_TEST_HOLD_CONVERSION_MS`, read by the CLI only): wait
   * this long after the converter wrote its files, before they are recorded
   * and moved into place, so a test can stop a conversion midway.
   */
  holdMs?: number;
}

/** One converted set. */
export interface ConvertedSet {
  /** Its precision. */
  precision: "fp32" | "fp16";
  /** Its folder, relative to the models root. */
  path: string;
  /** Converted now (false: found in place). */
  converted: boolean;
  /** Bytes it holds. */
  bytes: number;
}

/** What was done. */
export interface AddCheckpointResult {
  /** The sets, in `precisions` order. */
  sets: ConvertedSet[];
  /** The input files, as locked. */
  inputs: LockEntry[];
  /** Keys of the input that the conversion does not use. */
  ignored: { count: number; prefixes: string[] };
  /** The layout found (from `mod/checkpoint`). */
  layout: string;
  /** The lock overlay written (false: it held these entries already). */
  lockWritten: boolean;
  /** The lock overlay's path. */
  lockFile: string;
  /** The config keys that point at the first set. */
  edits: ConfigEdit[];
  /** The new overlay text for {@link writeOutcome}; undefined: it holds these entries already. */
  lockText?: string;
  /** Saves the input hashes to the verification cache (after {@link writeOutcome}). */
  saveCache(): Promise<void>;
}

/** The input files of a source, absolute, with their lock component. */
async function inputFiles(
  target: string,
  source: AddCheckpointOptions["source"],
): Promise<Array<{ abs: string; component: ModelComponent }>> {
  if (!source.folder) {
    return [{ abs: target, component: source.kind === "vae" ? "vae_decoder" : "unet" }];
  }
  const list = async (dir: string) => {
    const out: string[] = [];
    try {
      for await (const e of Deno.readDir(dir)) if (e.isFile) out.push(join(dir, e.name));
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    }
    return out.sort();
  };
  // What the reader may open: the configs and the weights (safetensors preferred, as it does).
  const weights = (names: string[]) => {
    const st = names.filter((n) => n.endsWith(".safetensors"));
    return [
      ...names.filter((n) => n.endsWith(".json")),
      ...(st.length > 0 ? st : names.filter((n) => n.endsWith(".bin"))),
    ];
  };
  if (source.kind === "vae") {
    return weights(await list(target)).map((abs) => ({ abs, component: "vae_decoder" as const }));
  }
  const files: Array<{ abs: string; component: ModelComponent }> = [
    { abs: join(target, "model_index.json"), component: "unet" },
  ];
  const parts: Array<[string, ModelComponent]> = [
    ["text_encoder", "text_encoder"],
    ["unet", "unet"],
    ["vae", "vae_decoder"],
  ];
  for (const [dir, component] of parts) {
    for (const abs of weights(await list(join(target, dir)))) files.push({ abs, component });
  }
  // Its own tokenizer and scheduler config when it has them (else the converter's SD 1.x ones).
  const has = (p: string) => Deno.stat(p).then((s) => s.isFile, () => false);
  const vocab = join(target, "tokenizer", "vocab.json");
  const merges = join(target, "tokenizer", "merges.txt");
  if (await has(vocab) && await has(merges)) {
    files.push({ abs: vocab, component: "tokenizer" }, { abs: merges, component: "tokenizer" });
  }
  const scheduler = join(target, "scheduler", "scheduler_config.json");
  if (await has(scheduler)) files.push({ abs: scheduler, component: "scheduler" });
  return files;
}

/** The folder name of a converted set. */
function setFolder(
  target: string,
  source: AddCheckpointOptions["source"],
  precision: string,
  ema: boolean,
): string {
  const stem = source.folder
    ? basename(target)
    : basename(target).slice(0, basename(target).length - extname(target).length);
  const name = `${stem}${ema ? "-ema" : ""}-${precision}`;
  return source.kind === "vae" ? `${CONVERTED_DIR}/vae/${name}` : `${CONVERTED_DIR}/${name}`;
}

/**
 * Converts and locks a checkpoint, diffusers folder or VAE (see the module
 * documentation).
 *
 * @throws AddError, or `mod/checkpoint`'s CheckpointError, before anything is written
 */
export async function addCheckpoint(options: AddCheckpointOptions): Promise<AddCheckpointResult> {
  const root = resolve(options.root);
  const target = resolve(options.target).replace(/\/+$/, "");
  const { source, signal } = options;
  const rel = toLockPath(target, root);
  if (rel === "" || rel.startsWith("../") || rel === ".." || rel.startsWith("/")) {
    throw new AddError(
      `${target} is not under the models root ${root} (models.lock paths are relative to it): ` +
        `move it there, e.g. \`mv ${target} ${join(root, basename(target))}\`, and run this ` +
        "again (or pass --root / set [models] root); nothing was written",
    );
  }
  if (rel === CONVERTED_DIR || rel.startsWith(`${CONVERTED_DIR}/`)) {
    throw new AddError(
      `${target} lies in ${join(root, CONVERTED_DIR)}, where converted sets are written; ` +
        "move it elsewhere under the models root; nothing was written",
    );
  }
  const ema = source.kind === "checkpoint" && options.ema === true;

  // 1. Opened and checked before anything is written (the one-line refusals).
  let layout: string;
  let ignored: { count: number; prefixes: string[] } = { count: 0, prefixes: [] };
  if (source.kind === "vae") {
    const vae = await openVaeWeights(target);
    layout = "standalone VAE";
    vae.close();
  } else {
    const ck = await openSd15Checkpoint(target, { ema });
    layout = String(ck.layout);
    ignored = { count: ck.ignored.count, prefixes: [...ck.ignored.prefixes] };
    ck.close();
  }
  signal?.throwIfAborted();

  // 2. The inputs, hashed and locked as local files.
  const lock = await readLock(options.lock);
  const inputs = await inputFiles(target, source);
  const cacheFile = join(root, ".verified.json");
  const cache = await loadVerifyCache(cacheFile);
  const entries: LockEntry[] = [];
  let hashed = 0;
  for (const [i, f] of inputs.entries()) {
    const path = toLockPath(f.abs, root);
    const stat = await Deno.stat(f.abs);
    const mtimeMs = stat.mtime?.getTime() ?? null;
    let sha = cachedSha256(cache, path, stat.size, mtimeMs);
    if (sha === undefined) {
      const line = options.progress === false ? null : new ProgressLine(
        `[${i + 1}/${inputs.length}] hashing ${path}`,
        stat.size,
        options.progress,
      );
      try {
        sha = await sha256File(f.abs, line ? (done) => line.update(done) : undefined);
      } finally {
        line?.finish();
      }
      hashed++;
      if (mtimeMs !== null) cache.files[path] = { size: stat.size, mtimeMs, sha256: sha };
    }
    entries.push({ component: f.component, path, size: stat.size, sha256: sha });
    signal?.throwIfAborted();
  }
  const newFiles = entries;

  // 3. Each set: reused when in place, else converted into a scratch folder.
  const converter = source.kind === "vae" ? VAE_CONVERTER : CHECKPOINT_CONVERTER;
  const allFiles = [
    ...lock.files.filter((f) => !newFiles.some((n) => n.path === f.path)),
    ...newFiles,
  ];
  const sets: ConvertedSet[] = [];
  const derived: Array<Omit<DerivedEntry, "outputs"> & { outputs: string[] }> = [];
  const builtNow: string[] = [];
  // Folders this run creates for the sets, removed again (when empty) if it fails.
  const made = [join(root, CONVERTED_DIR, "vae"), join(root, CONVERTED_DIR)];
  const existed = await Promise.all(made.map((d) => Deno.stat(d).then(() => true, () => false)));
  try {
    for (const precision of options.precisions) {
      const path = setFolder(target, source, precision, ema);
      const setOptions: SetOptions = {
        precision,
        ...(source.kind === "checkpoint" ? { ema } : {}),
      };
      const table = {
        component: (source.kind === "vae" ? "vae_decoder" : "unet") as ModelComponent,
        path,
        converter,
        from: entries.map((e) => e.path),
        options: setOptions as unknown as Record<string, unknown>,
      };
      const recipe = lockRecipe({ ...table, outputs: [] }, allFiles);
      const dir = join(root, ...path.split("/"));
      const known = lock.derived.find((d) => d.path === path);
      const names = known ? known.outputs.map((o) => o.slice(path.length + 1)) : undefined;
      const found = await checkDerived(dir, recipe, names ? { names } : {});
      let record;
      if (found.ok) {
        record = found.record;
        log("info", "models", "converted set already in place; nothing to convert", {
          folder: path,
          key: recipeKey(recipe).slice(0, 16),
        });
      } else {
        log("info", "models", `converting ${rel} (${layout}) to ${precision} ONNX`, {
          folder: path,
          reason: `${found.problem}: ${found.detail}`,
        });
        const inputsAbs = entries.map((e) => join(root, ...e.path.split("/")));
        const done = await ensureDerived(dir, recipe, async (into) => {
          let writing = "";
          const files = await runSetConversion(
            source.kind,
            inputsAbs,
            into,
            setOptions,
            signal,
            (p) => {
              if (p.component === writing) return;
              writing = p.component;
              log("info", "models", `writing ${p.component} (${p.total} tensors)`);
            },
          );
          if (options.holdMs) await new Promise((r) => setTimeout(r, options.holdMs));
          return { files };
        }, { signal });
        record = done.record;
        builtNow.push(dir);
      }
      signal?.throwIfAborted();
      sets.push({
        precision,
        path,
        converted: !found.ok,
        bytes: record.files.reduce((n, f) => n + f.size, 0),
      });
      derived.push({ ...table, outputs: record.files.map((f) => `${path}/${f.name}`) });
    }

    // 4. Lock and config in one synchronous step (see writeOutcome).
    const lockFile = localOverlayPath(options.lock);
    const first = derived[0];
    const edits: ConfigEdit[] = source.kind === "vae"
      ? [{ section: "models", key: "vae", value: tomlString(first.path) }]
      : [
        { section: "models", key: "base", value: tomlString(first.path) },
        ...(first.outputs.includes(`${first.path}/controlnet_unet/model.onnx`)
          ? [{
            section: "models",
            key: "controlnet_unet",
            value: tomlString(`${first.path}/controlnet_unet/model.onnx`),
          }]
          : []),
      ];
    const unchanged = newFiles.every((n) =>
      lock.files.some((f) =>
        f.path === n.path && f.sha256 === n.sha256 && f.size === n.size
      )
    ) && derived.every((d) =>
      lock.derived.some((l) =>
        l.path === d.path && l.converter === d.converter &&
        JSON.stringify(l.from) === JSON.stringify(d.from) &&
        sorted(l.options) === sorted(d.options) &&
        JSON.stringify(l.outputs) === JSON.stringify(d.outputs)
      )
    );
    let lockText: string | undefined;
    if (!unchanged) {
      let old = "";
      try {
        old = await Deno.readTextFile(lockFile);
      } catch (e) {
        if (!(e instanceof Deno.errors.NotFound)) throw e;
      }
      const comment = [
        `${source.kind === "vae" ? "VAE" : "checkpoint"}: ${rel} (${layout}), converted here ` +
        `into ${derived.map((d) => d.path).join(", ")}`,
        "local files: no url, so they are verified at start-up and never downloaded",
      ];
      lockText = updateLockText(old, newFiles, comment, lockFile, derived).text;
    }
    return {
      sets,
      inputs: entries,
      ignored,
      layout,
      lockWritten: lockText !== undefined,
      lockFile,
      edits,
      ...(lockText !== undefined ? { lockText } : {}),
      // Saved once the outcome is written, so a stop leaves no trace of this run.
      saveCache: () => hashed > 0 ? saveVerifyCache(cacheFile, cache) : Promise.resolve(),
    };
  } catch (e) {
    // A set converted by this run is not kept without its lock entry.
    for (const dir of builtNow) await Deno.remove(dir, { recursive: true }).catch(() => {});
    for (const [i, dir] of made.entries()) {
      if (!existed[i]) await Deno.remove(dir).catch(() => {}); // only when empty
    }
    throw e;
  }
}

/** Options as JSON with sorted keys, for comparing. */
function sorted(o: Record<string, unknown> | undefined): string {
  return JSON.stringify(Object.entries(o ?? {}).sort(([a], [b]) => (a < b ? -1 : 1)));
}

/**
 * Writes the lock overlay (when it changed) and the config file (when
 * `config` is given and its text changed), synchronously: a signal's
 * handler runs on the event loop, so it finds either nothing or everything
 * written. Each file is written to a temporary file and renamed.
 *
 * @returns whether each was written
 */
export function writeOutcome(
  result: AddCheckpointResult,
  config?: { path: string; text: string; newText: string },
): { lock: boolean; config: boolean } {
  const lockText = result.lockText;
  const writes: Array<[string, string]> = [];
  if (lockText !== undefined) writes.push([result.lockFile, lockText]);
  if (config && config.newText !== config.text) writes.push([config.path, config.newText]);
  const tmps: string[] = [];
  try {
    for (const [path, text] of writes) {
      const tmp = `${path}.${crypto.randomUUID()}.tmp`;
      tmps.push(tmp);
      Deno.mkdirSync(dirname(path), { recursive: true });
      Deno.writeTextFileSync(tmp, text);
    }
    for (const [i, [path]] of writes.entries()) Deno.renameSync(tmps[i], path);
  } catch (e) {
    for (const tmp of tmps) {
      try {
        Deno.removeSync(tmp);
      } catch {
        // renamed already, or never written
      }
    }
    throw e;
  }
  return {
    lock: lockText !== undefined,
    config: config !== undefined && config.newText !== config.text,
  };
}
