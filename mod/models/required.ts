/**
 * Which lock entries a configuration needs: exactly the files its keys name
 * ({@link neededFiles}).
 *
 * @module
 */

import { isAbsolute, join, relative, sep } from "node:path";
import { BASE_COMPONENTS, type DerivedEntry, type LockEntry } from "./lock.ts";

/** Turns a path (absolute under `root`, or root-relative) into lock form ("a/b/c"). */
export function toLockPath(path: string, root: string): string {
  const rel = isAbsolute(path) ? relative(root, path) : path;
  return rel.split(sep).join("/").replace(/^(\.\/)+/, "");
}

/** The parts of the resolved config that name model files. */
export interface ModelPathsConfig {
  /** Absolute models root, SD 1.5 base folder and ControlNet UNet path. */
  models: {
    root: string;
    base: string;
    controlnetUnet: string;
    /** "tiny": the tiny VAE decoder is loaded instead of the base folder's (and must be locked). */
    vaeDecoder: "full" | "tiny";
    /** Absolute path of the tiny VAE decoder. */
    tinyVaeDecoder: string;
    /** Absolute folder of the VAE set used instead of the base set's; null/absent = none. */
    vae?: string | null;
  };
  /** Per-feature enable flags and absolute model paths. */
  controlnet: {
    depth: { enabled: boolean; model: string; preprocessor: string };
    openpose: { enabled: boolean; model: string; detector: string; estimator: string };
    inpaint: { enabled: boolean; model: string };
  };
  /** Configured LoRA files (absolute); absent = none. */
  lora?: { files: ReadonlyArray<{ path: string }> };
  /** Configured textual-inversion embedding files (absolute); absent = none. */
  prompt?: { embeddings: ReadonlyArray<{ path: string }> };
}

/** Files of the SD 1.5 base folder (diffusers ONNX layout) the server loads. */
export const BASE_FILES: readonly string[] = [
  "text_encoder/model.onnx",
  "unet/model.onnx",
  "vae_decoder/model.onnx",
  "vae_encoder/model.onnx",
  "tokenizer/vocab.json",
  "tokenizer/merges.txt",
  "scheduler/scheduler_config.json",
];

/** One file a configuration needs, with the config key that names it. */
export interface NeededFile {
  /** Lock path (relative to the models root). */
  path: string;
  /** Absolute path where the file is expected. */
  abs: string;
  /** The config key that makes it needed, e.g. `[models] base = "sd15"`. */
  key: string;
  /** Its lock entry; undefined when the lock does not list it (or it is derived). */
  entry?: LockEntry;
  /** The `[[derived]]` folder that makes it, when it is not a `[[file]]`. */
  derived?: DerivedEntry;
}

/** What {@link neededFiles} found. */
export interface NeededFiles {
  /** Every needed file, locked or not, in config order (no duplicates). */
  files: NeededFile[];
  /** Configured paths outside the models root (they can never be locked), as messages. */
  outside: string[];
  /** The `[[derived]]` folders that make needed files (their inputs are in `files`). */
  derived: DerivedEntry[];
}

const BASE_COMPONENT_SET: ReadonlySet<string> = new Set(BASE_COMPONENTS);

/** `[section] key = "value"` with the value shown relative to the root when under it. */
function keyText(section: string, key: string, abs: string, root: string): string {
  const rel = toLockPath(abs, root);
  const shown = rel.startsWith("../") || isAbsolute(rel) ? abs : rel;
  return `[${section}] ${key} = ${JSON.stringify(shown)}`;
}

/**
 * Exactly the files a configuration needs, each tied to the config key that
 * names it; lock entries no key reaches are ignored. Per key:
 *
 * - `[models] base`: {@link BASE_FILES} of that folder, plus every lock entry
 *   under it with a base component (external data such as `unet/weights.pb`,
 *   `tokenizer/tokenizer.json`). A locked `tokenizer/tokenizer.json` stands in
 *   for `vocab.json` + `merges.txt` when those are not locked (the tokenizer
 *   prefers it).
 * - a single model file (`[models] controlnet_unet`, `[controlnet.*] model`,
 *   `preprocessor`, `detector`, `estimator`, only for enabled features): the
 *   file, plus the lock entries beside it in the same folder with the same
 *   component that are not `.onnx` models themselves (its external data).
 * - `[models] tiny_vae_decoder` when `vae_decoder = "tiny"`: as a single model file,
 *   in place of the base folder's `vae_decoder/` (which the engine then never opens).
 * - `[models] vae` (a VAE set folder): its `vae_encoder/` and, unless the tiny
 *   decoder is chosen, `vae_decoder/` files, in place of the base folder's.
 * - `[lora] files`: each configured file.
 * - `[prompt] embeddings`: each configured file.
 *
 * A needed path that is an output of a `[[derived]]` folder (and not a
 * `[[file]]`) brings every output of that folder and, before them, its
 * inputs (the pinned files it is made from), under the same key.
 */
export function neededFiles(
  config: ModelPathsConfig,
  entries: readonly LockEntry[],
  derivedEntries: readonly DerivedEntry[] = [],
): NeededFiles {
  const root = config.models.root;
  const byPath = new Map(entries.map((e) => [e.path, e]));
  const byOutput = new Map(derivedEntries.flatMap((d) => d.outputs.map((o) => [o, d] as const)));
  const files: NeededFile[] = [];
  const outside: string[] = [];
  const derived: DerivedEntry[] = [];
  const seen = new Set<string>();
  const add = (path: string, key: string) => {
    if (seen.has(path)) return;
    const maker = byPath.has(path) ? undefined : byOutput.get(path);
    if (maker && !derived.includes(maker)) {
      derived.push(maker);
      for (const input of maker.from) add(input, key);
      for (const out of maker.outputs) add(out, key);
      return;
    }
    seen.add(path);
    files.push({
      path,
      abs: join(root, ...path.split("/")),
      key,
      entry: byPath.get(path),
      ...(maker ? { derived: maker } : {}),
    });
  };
  const lockPathOf = (abs: string, key: string): string | undefined => {
    const rel = toLockPath(abs, root);
    if (rel.startsWith("../") || rel === ".." || isAbsolute(rel)) {
      outside.push(`${abs} (${key}) is outside the models root ${root}, so it cannot be locked`);
      return undefined;
    }
    return rel;
  };

  const baseKey = keyText("models", "base", config.models.base, root);
  const base = lockPathOf(config.models.base, baseKey);
  if (base !== undefined) {
    const tokenizerJson = byPath.has(`${base}/tokenizer/tokenizer.json`) ||
      byOutput.has(`${base}/tokenizer/tokenizer.json`);
    // With the tiny decoder chosen the engine never opens the set's own VAE decoder,
    // and with a VAE set configured neither of the base set's VAE models.
    const tiny = config.models.vaeDecoder === "tiny";
    const ownVae = !!config.models.vae;
    const skip = (component: string) =>
      (component === "vae_decoder" && (tiny || ownVae)) ||
      (component === "vae_encoder" && ownVae);
    for (const f of BASE_FILES) {
      const path = `${base}/${f}`;
      if (tokenizerJson && f.startsWith("tokenizer/") && !byPath.has(path) && !byOutput.has(path)) {
        continue;
      }
      if (skip(f.slice(0, f.indexOf("/")))) continue;
      add(path, baseKey);
    }
    for (const e of [...entries, ...derivedEntries]) {
      if (skip(e.component)) continue;
      if (e.path.startsWith(`${base}/`) && BASE_COMPONENT_SET.has(e.component)) {
        for (const p of "outputs" in e ? e.outputs : [e.path]) add(p, baseKey);
      }
    }
  }

  if (config.models.vae) {
    const vaeKey = keyText("models", "vae", config.models.vae, root);
    const vae = lockPathOf(config.models.vae, vaeKey);
    if (vae !== undefined) {
      const tiny = config.models.vaeDecoder === "tiny";
      const wanted = tiny ? ["vae_encoder"] : ["vae_decoder", "vae_encoder"];
      for (const c of wanted) add(`${vae}/${c}/model.onnx`, vaeKey);
      for (const e of [...entries, ...derivedEntries]) {
        if (e.path.startsWith(`${vae}/`) && wanted.includes(e.component)) {
          for (const p of "outputs" in e ? e.outputs : [e.path]) add(p, vaeKey);
        }
      }
    }
  }

  const single = (abs: string, section: string, key: string) => {
    const text = keyText(section, key, abs, root);
    const path = lockPathOf(abs, text);
    if (path === undefined) return;
    add(path, text);
    const owner = byPath.get(path);
    // A derived model brings its whole folder (and inputs) through `add`.
    if (!owner) return;
    const dir = path.slice(0, path.lastIndexOf("/") + 1);
    for (const e of entries) {
      const name = e.path.slice(dir.length);
      if (
        e.path.startsWith(dir) && !name.includes("/") && e.component === owner.component &&
        !name.endsWith(".onnx")
      ) add(e.path, text);
    }
  };
  const cn = config.controlnet;
  if (cn.depth.enabled || cn.openpose.enabled || cn.inpaint.enabled) {
    single(config.models.controlnetUnet, "models", "controlnet_unet");
  }
  if (cn.depth.enabled) {
    single(cn.depth.model, "controlnet.depth", "model");
    single(cn.depth.preprocessor, "controlnet.depth", "preprocessor");
  }
  if (cn.openpose.enabled) {
    single(cn.openpose.model, "controlnet.openpose", "model");
    single(cn.openpose.detector, "controlnet.openpose", "detector");
    single(cn.openpose.estimator, "controlnet.openpose", "estimator");
  }
  if (cn.inpaint.enabled) single(cn.inpaint.model, "controlnet.inpaint", "model");
  if (config.models.vaeDecoder === "tiny") {
    single(config.models.tinyVaeDecoder, "models", "tiny_vae_decoder");
  }
  for (const f of config.lora?.files ?? []) {
    const text = keyText("lora", "files", f.path, root);
    const path = lockPathOf(f.path, text);
    if (path !== undefined) add(path, text);
  }
  for (const e of config.prompt?.embeddings ?? []) {
    const text = keyText("prompt", "embeddings", e.path, root);
    const path = lockPathOf(e.path, text);
    if (path !== undefined) add(path, text);
  }
  return { files, outside, derived };
}
