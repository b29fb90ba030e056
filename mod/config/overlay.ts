/**
 * Local overlays: a user's own settings live next to the shipped file, in a
 * file git does not track, so that updating the checkout (`git pull`) never
 * conflicts with them and never undoes them. `config.toml` is read first,
 * then `config.local.toml` on top of it; `models.lock` likewise gets
 * `models.local.lock` (the files `deno task models add` locks).
 *
 * @module
 */

import { basename, dirname, extname, join } from "node:path";

/**
 * The overlay of `path`: the same folder and name with `.local` before the
 * extension (`config.toml` → `config.local.toml`, `models.lock` →
 * `models.local.lock`, `worker.toml` → `worker.local.toml`).
 */
export function localOverlayPath(path: string): string {
  const ext = extname(path);
  const name = basename(path, ext);
  return join(dirname(path), `${name}.local${ext}`);
}

function isTable(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value) &&
    !(value instanceof Date);
}

/**
 * `overlay` laid over `base`: tables merge key by key, at every depth; any
 * other value (a string, a number, an array such as `[lora] files`) in the
 * overlay replaces the base's whole.
 */
export function mergeTables(
  base: Record<string, unknown>,
  overlay: Record<string, unknown>,
): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(overlay)) {
    const under = out[key];
    out[key] = isTable(under) && isTable(value) ? mergeTables(under, value) : value;
  }
  return out;
}

/** Whether `doc` sets a value at `path` (a key path into parsed TOML). */
export function setsPath(doc: unknown, path: readonly PropertyKey[]): boolean {
  let node = doc;
  for (const key of path) {
    if (!isTable(node) || !(String(key) in node)) return false;
    node = node[String(key)];
  }
  return true;
}
