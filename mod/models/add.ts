/**
 * `deno task models add`: locks an own export. Checks every file first
 * (contract, external data, tokenizer, scheduler; see export_check.ts), and
 * only when all fit hashes them (a progress line per file on stderr; files
 * unchanged since they were last hashed come from the verification cache)
 * and writes their entries — local entries without `url`: verified at
 * start-up, never downloaded — into the lock's local overlay
 * `models.local.lock`, which git does not track, so the shipped models.lock
 * is never edited and updating the checkout never conflicts. Entries for the
 * same paths are replaced, nothing else changes. The hashes go into the
 * verification cache too, so the first start does not hash again.
 *
 * @module
 */

import { isAbsolute, join, resolve } from "node:path";
import { type ConfigEdit, localOverlayPath } from "../config/mod.ts";
import { log } from "../log/mod.ts";
import { checkComponentFile, checkExportFolder, type ExportCheck } from "./export_check.ts";
import { EXTRA_COMPONENTS, type LockEntry, type ModelComponent } from "./lock.ts";
import { updateLockText, writeAtomically } from "./lock_write.ts";
import { ProgressLine, type ProgressOptions } from "./progress.ts";
import { toLockPath } from "./required.ts";
import { sha256File } from "../bytes/mod.ts";
import { cachedSha256, loadVerifyCache, saveVerifyCache } from "./verify_cache.ts";

/**
 * What `--component` accepts: the single-file lock components, and
 * `tiny_vae_decoder` (a TAESD decoder, locked as a `vae_decoder` file; no
 * public export is pinned in models.lock, so this is how one is added).
 */
export type AddComponent = ModelComponent | "tiny_vae_decoder";

/** Components `--component` accepts (files outside a base set). */
export const ADD_COMPONENTS: readonly AddComponent[] = [...EXTRA_COMPONENTS, "tiny_vae_decoder"];

/** The config key each single-file component is named by. */
export const COMPONENT_KEY: Partial<Record<AddComponent, { section: string; key: string }>> = {
  controlnet_depth: { section: "controlnet.depth", key: "model" },
  controlnet_openpose: { section: "controlnet.openpose", key: "model" },
  controlnet_inpaint: { section: "controlnet.inpaint", key: "model" },
  controlnet_unet: { section: "models", key: "controlnet_unet" },
  depth: { section: "controlnet.depth", key: "preprocessor" },
  pose_detector: { section: "controlnet.openpose", key: "detector" },
  pose_estimator: { section: "controlnet.openpose", key: "estimator" },
  lora: { section: "lora", key: "files" },
  embedding: { section: "prompt", key: "embeddings" },
  tiny_vae_decoder: { section: "models", key: "tiny_vae_decoder" },
};

/** What to add. */
export interface AddOptions {
  /** The export folder (base set) or, with `component`, the one file. */
  target: string;
  /** A single-file component; absent = a whole diffusers-ONNX folder. */
  component?: AddComponent;
  /** The models root (lock paths are relative to it). */
  root: string;
  /** The models.lock in use: the entries go to its overlay (created when missing). */
  lock: string;
  /** Progress line options, or false for none. */
  progress?: ProgressOptions | false;
}

/** What was added. */
export interface AddResult {
  /** The entries written, in lock order. */
  entries: LockEntry[];
  /** How many old entries for the same paths were replaced. */
  replaced: number;
  /** The check of the export. */
  check: ExportCheck;
  /** Root-relative path of the folder (base) or file (component). */
  lockPath: string;
  /** The file the entries were written to (the lock's `models.local.lock`). */
  lockFile: string;
  /** The config keys to set for it (for a LoRA: the file alone; merge with the configured ones). */
  edits: ConfigEdit[];
  /** Files hashed now / taken from the cache. */
  hashed: number;
  /** Files whose hash came from the verification cache. */
  cached: number;
}

/** The comment a new `models.local.lock` starts with. */
const OVERLAY_HEADER =
  `# Your own model files, locked by \`deno task models add\`: read on top of the
# models.lock beside this file (an entry here replaces the one of the same path
# there). Git does not track this file, so updating the checkout never conflicts
# with it. Same format as models.lock (docs/models.md).
`;

/** Refused: the message lists every reason, one per line; nothing was written. */
export class AddError extends Error {
  /** Creates the error with a complete message. */
  constructor(message: string) {
    super(message);
    this.name = "AddError";
  }
}

/** A TOML string. */
export function tomlString(s: string): string {
  return JSON.stringify(s);
}

/** Checks, hashes and locks an export. */
export async function addModels(options: AddOptions): Promise<AddResult> {
  const root = resolve(options.root);
  const target = resolve(options.target);
  const rel = toLockPath(target, root);
  if (rel === "" || rel === ".") {
    throw new AddError(
      `${target} is the models root itself; put the export in a folder under it, e.g. ${
        join(root, "my-sd15")
      }`,
    );
  }
  if (rel.startsWith("../") || rel === ".." || isAbsolute(rel)) {
    throw new AddError(
      `${target} is not under the models root ${root} (models.lock paths are relative to it): ` +
        `move it there, e.g. \`mv ${target} ${join(root, target.split("/").pop()!)}\`, and run ` +
        "this again (or pass --root / set [models] root)",
    );
  }
  const component = options.component;
  const check = component === undefined
    ? await checkExportFolder(target)
    : await checkComponentFile(target, component);
  const what = component === undefined ? "export folder" : `${component} file`;
  if (check.problems.length > 0) {
    throw new AddError(
      `${target}: the ${what} does not fit the model contract; nothing was written:\n` +
        check.problems.map((p) => `  ${p}`).join("\n"),
    );
  }
  // Lock paths: under the folder for a set, beside the file for a component.
  const base = component === undefined ? rel : rel.slice(0, rel.lastIndexOf("/") + 1);
  const prefix = component === undefined ? `${base}/` : base;
  const folder = component === undefined ? target : target.slice(0, target.lastIndexOf("/"));

  const cacheFile = join(root, ".verified.json");
  const cache = await loadVerifyCache(cacheFile);
  const entries: LockEntry[] = [];
  let hashed = 0;
  let cached = 0;
  const n = check.files.length;
  for (const [i, f] of check.files.entries()) {
    const path = prefix + f.path;
    const abs = join(folder, ...f.path.split("/"));
    const stat = await Deno.stat(abs);
    const mtimeMs = stat.mtime?.getTime() ?? null;
    let sha = cachedSha256(cache, path, stat.size, mtimeMs);
    if (sha === undefined) {
      const line = options.progress === false
        ? null
        : new ProgressLine(`[${i + 1}/${n}] hashing ${path}`, stat.size, options.progress);
      try {
        sha = await sha256File(abs, line ? (done) => line.update(done) : undefined);
      } finally {
        line?.finish();
      }
      hashed++;
      if (mtimeMs !== null) cache.files[path] = { size: stat.size, mtimeMs, sha256: sha };
    } else cached++;
    entries.push({ component: f.component, path, size: stat.size, sha256: sha });
  }
  if (hashed > 0) await saveVerifyCache(cacheFile, cache);

  const lockFile = localOverlayPath(options.lock);
  let old = OVERLAY_HEADER;
  try {
    old = await Deno.readTextFile(lockFile);
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  const comment = [
    `${component === undefined ? "export folder" : component}: ${rel}` +
    (check.flavour ? ` (${check.flavour})` : ""),
    "local files: no url, so they are verified at start-up and never downloaded",
  ];
  const { text, replaced } = updateLockText(old, entries, comment, lockFile);
  await writeAtomically(lockFile, text);
  log("info", "models", replaced > 0 ? "lock entries replaced" : "lock entries added", {
    lock: lockFile,
    files: entries.length,
    replaced,
    hashed,
  });

  const edits: ConfigEdit[] = [];
  if (component === undefined) {
    edits.push({ section: "models", key: "base", value: tomlString(rel) });
    if (check.controlnetUnet) {
      edits.push({
        section: "models",
        key: "controlnet_unet",
        value: tomlString(`${rel}/controlnet_unet/model.onnx`),
      });
    }
  } else {
    const k = COMPONENT_KEY[component]!;
    const value = component === "lora"
      ? `[{ path = ${tomlString(rel)}, weight = 1.0 }]`
      : component === "embedding"
      ? `[${tomlString(rel)}]`
      : tomlString(rel);
    edits.push({ section: k.section, key: k.key, value });
    // The tiny decoder is used once it is chosen.
    if (component === "tiny_vae_decoder") {
      edits.push({ section: "models", key: "vae_decoder", value: tomlString("tiny") });
    }
  }
  return { entries, replaced, check, lockPath: rel, lockFile, edits, hashed, cached };
}
