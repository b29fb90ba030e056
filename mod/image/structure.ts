/**
 * Structural limits checked on the encoded bytes before any decoding, so
 * that a small file cannot make the decoder work for seconds:
 *
 * - a JPEG may have at most {@link MAX_JPEG_SCANS} scans (SOS segments). A
 *   progressive JPEG of 10,000 tiny scans took 48.5 s to decode, since
 *   libjpeg re-walks the coefficient buffer for every scan; ordinary
 *   progressive files have about 10 (libjpeg's default script has 10,
 *   mozjpeg's up to ~60).
 * - a PNG's text chunks (`tEXt`, `zTXt`, `iTXt`) are dropped: they never
 *   change pixels, and 200 compressed `zTXt` chunks took 21.7 s to inflate.
 *   The remaining ancillary chunks (colour profile, EXIF, transparency, …)
 *   may take at most {@link MAX_PNG_ANCILLARY_BYTES}, chunk framing included.
 *
 * Both walks are linear in the file and never read past its end; damage
 * they cannot make sense of is left for the decoder to report.
 * Sources: ITU-T T.81 §B.1.1.2–B.1.1.5 (markers, stuffed 0xFF 0x00, RSTn in
 * entropy-coded data) and §B.2.3 (scan header); PNG 3rd ed. §5.3 (chunk
 * layout), §5.4 (the ancillary bit: a lowercase first letter), §11.3.3
 * (textual chunks).
 *
 * @module
 */

import { ToolError } from "../mcp/tool.ts";
import { formatCount } from "./limits.ts";
import type { ImageField } from "./types.ts";

/** Most scans (SOS segments) a JPEG may have. */
export const MAX_JPEG_SCANS = 100;

/** Most bytes of non-text ancillary PNG chunks, 12 bytes of framing per chunk included. */
export const MAX_PNG_ANCILLARY_BYTES = 1_000_000;

/**
 * Counts the scans of a JPEG, stopping as soon as there are more than
 * `limit`. A walk it cannot follow stops and returns the count so far.
 */
export function countJpegScans(bytes: Uint8Array, limit: number = MAX_JPEG_SCANS): number {
  const n = bytes.length;
  let scans = 0;
  let p = 2; // after SOI
  while (p + 1 < n) {
    if (bytes[p] !== 0xff) return scans;
    while (p < n && bytes[p] === 0xff) p++;
    if (p >= n) return scans;
    const marker = bytes[p++];
    if (marker === 0xd9) return scans; // EOI
    if ((marker >= 0xd0 && marker <= 0xd7) || marker === 0x01) continue;
    if (p + 2 > n) return scans;
    const length = (bytes[p] << 8) | bytes[p + 1];
    if (length < 2) return scans;
    p += length;
    if (marker !== 0xda) continue;
    if (++scans > limit) return scans;
    // Entropy-coded data runs to the next marker other than a stuffed
    // 0xFF 0x00 or a restart marker.
    for (;;) {
      p = bytes.indexOf(0xff, p);
      if (p === -1 || p + 1 >= n) return scans;
      const next = bytes[p + 1];
      if (next === 0x00 || (next >= 0xd0 && next <= 0xd7) || next === 0xff) {
        p += next === 0xff ? 1 : 2;
        continue;
      }
      break;
    }
  }
  return scans;
}

/** The four-letter types of PNG text chunks. */
const TEXT_CHUNKS = new Set(["tEXt", "zTXt", "iTXt"]);

/** What {@link prunePngChunks} found. */
export interface PrunedPng {
  /** The PNG without its text chunks (the input itself when it had none). */
  bytes: Uint8Array;
  /** Bytes of the ancillary chunks kept, framing included. */
  ancillaryBytes: number;
  /** Text chunks dropped. */
  textChunks: number;
}

function u32(bytes: Uint8Array, at: number): number {
  return ((bytes[at] << 24) | (bytes[at + 1] << 16) | (bytes[at + 2] << 8) | bytes[at + 3]) >>> 0;
}

/**
 * Drops the text chunks of a PNG whose signature was recognised and sums
 * the ancillary bytes left. Chunks are copied whole (their CRCs stay
 * valid); anything after a truncated chunk is kept as it is.
 */
export function prunePngChunks(bytes: Uint8Array): PrunedPng {
  const n = bytes.length;
  const kept: Array<[number, number]> = [];
  let keptFrom = 0;
  let ancillaryBytes = 0;
  let textChunks = 0;
  let p = 8;
  while (p + 12 <= n) {
    const length = u32(bytes, p);
    const end = p + 12 + length;
    if (end > n) break;
    const type = String.fromCharCode(bytes[p + 4], bytes[p + 5], bytes[p + 6], bytes[p + 7]);
    const ancillary = (bytes[p + 4] & 0x20) !== 0;
    if (TEXT_CHUNKS.has(type)) {
      if (p > keptFrom) kept.push([keptFrom, p]);
      keptFrom = end;
      textChunks++;
    } else if (ancillary) {
      ancillaryBytes += end - p;
    }
    p = end;
    if (type === "IEND") break;
  }
  if (textChunks === 0) return { bytes, ancillaryBytes, textChunks };
  if (keptFrom < n) kept.push([keptFrom, n]);
  let size = 0;
  for (const [a, b] of kept) size += b - a;
  const out = new Uint8Array(size);
  let offset = 0;
  for (const [a, b] of kept) {
    out.set(bytes.subarray(a, b), offset);
    offset += b - a;
  }
  return { bytes: out, ancillaryBytes, textChunks };
}

/**
 * Applies the limits of the module documentation to a sniffed image and
 * returns the bytes to decode (a PNG without its text chunks). Throws
 * `ToolError("image")` naming `field`.
 */
export function checkImageStructure(
  field: ImageField,
  format: "png" | "jpeg",
  bytes: Uint8Array,
): Uint8Array {
  if (format === "jpeg") {
    const scans = countJpegScans(bytes);
    if (scans > MAX_JPEG_SCANS) {
      throw new ToolError(
        "image",
        `${field}: the JPEG has more than ${MAX_JPEG_SCANS} scans; ordinary progressive JPEGs ` +
          `have about 10. Re-save it as a baseline or standard progressive JPEG, or as PNG`,
      );
    }
    return bytes;
  }
  const pruned = prunePngChunks(bytes);
  if (pruned.ancillaryBytes > MAX_PNG_ANCILLARY_BYTES) {
    throw new ToolError(
      "image",
      `${field}: the PNG carries ${formatCount(pruned.ancillaryBytes)} bytes of metadata ` +
        `chunks (colour profile, EXIF, …); the limit is ${
          formatCount(MAX_PNG_ANCILLARY_BYTES)
        }. Re-save it without metadata`,
    );
  }
  return pruned.bytes;
}
