/**
 * Streaming sha256 of a file: constant memory for multi-GB weights.
 *
 * @module
 */

import { createHash, type Hash } from "node:crypto";

/** Feeds the first `limit` bytes (default: all) of `path` into `hash`; returns bytes read. */
export async function hashFileInto(hash: Hash, path: string, limit = Infinity): Promise<number> {
  using file = await Deno.open(path, { read: true });
  const buf = new Uint8Array(1 << 20);
  let total = 0;
  while (total < limit) {
    const want = Math.min(buf.length, limit - total);
    const n = await file.read(want === buf.length ? buf : buf.subarray(0, want));
    if (n === null) break;
    hash.update(buf.subarray(0, n));
    total += n;
  }
  return total;
}

/** Returns the sha256 of a whole file as 64 lowercase hex digits. */
export async function sha256File(path: string): Promise<string> {
  const hash = createHash("sha256");
  await hashFileInto(hash, path);
  return hash.digest("hex");
}
