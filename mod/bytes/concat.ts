/**
 * Joining byte arrays: the one copy of the loop the ONNX writers, the
 * checkpoint fixtures, the JPEG fixtures and the file readers share.
 *
 * @module
 */

/** `parts` one after another, in a new array (a copy even for one part). */
export function concatBytes(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}
