/**
 * Streaming sha256 of a file: constant memory for multi-GB weights.
 *
 * @module
 */

import { createHash, type Hash } from "node:crypto";

/**
 * Feeds the first `limit` bytes (default: all) of `path` into `hash`; returns
 * bytes read. `onBytes` gets the running total after each read (progress).
 */
export async function hashFileInto(
  hash: Hash,
  path: string,
  limit = Infinity,
  onBytes?: (done: number) => void,
): Promise<number> {
  using file = await Deno.open(path, { read: true });
  const buf = new Uint8Array(1 << 20);
  let total = 0;
  while (total < limit) {
    const want = Math.min(buf.length, limit - total);
    const n = await file.read(want === buf.length ? buf : buf.subarray(0, want));
    if (n === null) break;
    hash.update(buf.subarray(0, n));
    total += n;
    onBytes?.(total);
  }
  return total;
}

/** Returns the sha256 of a whole file as 64 lowercase hex digits; `onBytes` reports progress. */
export async function sha256File(
  path: string,
  onBytes?: (done: number) => void,
): Promise<string> {
  const hash = createHash("sha256");
  await hashFileInto(hash, path, Infinity, onBytes);
  return hash.digest("hex");
}
