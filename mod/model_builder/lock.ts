/**
 * The fixture `models.lock` (TOML): one `[[file]]` per built file with its
 * component, path relative to the models root, a `fixture://` URL, size and
 * sha256 — the same shape as the real lock, so mod/models can verify it.
 *
 * @module
 */

import { createHash } from "node:crypto";
import { parse, stringify } from "smol-toml";

/** Components named in models.lock. */
export type LockComponent =
  | "text_encoder"
  | "unet"
  | "vae_decoder"
  | "vae_encoder"
  | "tokenizer"
  | "scheduler"
  | "controlnet_depth"
  | "controlnet_openpose"
  | "controlnet_inpaint"
  | "controlnet_unet"
  | "depth"
  | "pose_detector"
  | "pose_estimator"
  | "lora";

/** One `[[file]]` entry. */
export interface LockEntry {
  /** What the file is. */
  component: LockComponent;
  /** Path relative to the models root, "/"-separated. */
  path: string;
  /** Where it comes from: `fixture://<path>` for built fixtures. */
  url: string;
  /** Size in bytes. */
  size: number;
  /** Lower-case hex sha256 of the bytes. */
  sha256: string;
}

/** Lower-case hex sha256 of `bytes`. */
export function sha256Hex(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/** A lock entry for fixture bytes at `path`. */
export function lockEntry(component: LockComponent, path: string, bytes: Uint8Array): LockEntry {
  return {
    component,
    path,
    url: `fixture://${path}`,
    size: bytes.byteLength,
    sha256: sha256Hex(bytes),
  };
}

/** Serializes entries (sorted by path) as models.lock TOML. */
export function lockText(entries: readonly LockEntry[]): string {
  const file = [...entries].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0)).map((
    e,
  ) => ({ component: e.component, path: e.path, url: e.url, size: e.size, sha256: e.sha256 }));
  return "# Test-sized models built by mod/model_builder (deno task fixtures). Not for real use.\n\n" +
    stringify({ file }) + "\n";
}

/** Parses models.lock TOML back into entries (throws on a malformed entry). */
export function parseLock(text: string): LockEntry[] {
  const doc = parse(text) as { file?: unknown };
  if (!Array.isArray(doc.file)) throw new Error("models.lock: no [[file]] entries");
  return doc.file.map((f: Record<string, unknown>, i: number) => {
    const { component, path, url, size, sha256 } = f;
    if (
      typeof component !== "string" || typeof path !== "string" || typeof url !== "string" ||
      typeof size !== "number" || typeof sha256 !== "string"
    ) {
      throw new Error(`models.lock: [[file]] #${i + 1} lacks component/path/url/size/sha256`);
    }
    return { component: component as LockComponent, path, url, size, sha256 };
  });
}
