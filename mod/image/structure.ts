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
 * Both walks are linear in the file and never read past its end. A JPEG
 * whose markers the walk cannot follow is refused as corrupt (libjpeg would
 * skip the bytes it cannot place, and the scans behind them, uncounted);
 * other damage is left for the decoder to report.
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

/** A JPEG whose marker walk cannot be followed (see {@link countJpegScans}). */
export class CorruptJpeg extends Error {}

function hex(byte: number): string {
  return byte.toString(16).toUpperCase().padStart(2, "0");
}

/**
 * Whether libjpeg reads marker `m` as one with a length field: SOFn and
 * DHT/JPG/DAC (0xC0–0xCF), DQT, DNL, DRI, APPn and COM. SOS is handled
 * apart; everything else but the parameterless markers is refused.
 */
function isSegment(m: number): boolean {
  return (m >= 0xc0 && m <= 0xcf) || m === 0xdb || m === 0xdc || m === 0xdd ||
    (m >= 0xe0 && m <= 0xef) || m === 0xfe;
}

/**
 * Counts the scans (SOS segments) of a JPEG whose SOI was recognised,
 * stopping as soon as there are more than `limit`, the way libjpeg finds
 * them (jdmarker.c `next_marker`, `read_markers`; jdhuff.c
 * `fill_bit_buffer`): 0xFF fill bytes before a marker and, in scan data,
 * stuffed 0xFF 0x00 and RST0–7 are skipped; any other 0xFF xx ends the scan
 * data. Throws {@link CorruptJpeg} where libjpeg would resynchronise
 * instead of follow the structure, since skipped bytes can hide scans from a
 * walk that stops there (one 0x00 before the first SOS hid 8,000): a byte
 * other than 0xFF where a marker must start, FF 00 outside scan data, a
 * second SOI, a segment length below 2, and markers libjpeg does not read
 * (0x02–0xBF, which its restart resynchronisation discards, DHP, EXP,
 * JPGn). A file that ends early (no EOI) stops the count there: nothing
 * after its end can hold a scan, and the decoder reports the truncation.
 */
export function countJpegScans(bytes: Uint8Array, limit: number = MAX_JPEG_SCANS): number {
  const n = bytes.length;
  let scans = 0;
  let p = 2; // after SOI
  while (p < n) {
    if (bytes[p] !== 0xff) {
      throw new CorruptJpeg(
        `byte 0x${hex(bytes[p])} at offset ${p} where a marker must start`,
      );
    }
    const at = p;
    while (p < n && bytes[p] === 0xff) p++; // fill bytes (T.81 §B.1.1.2)
    if (p >= n) return scans;
    const marker = bytes[p++];
    if (marker === 0xd9) return scans; // EOI
    if ((marker >= 0xd0 && marker <= 0xd7) || marker === 0x01) continue; // RSTn, TEM
    if (marker !== 0xda && !isSegment(marker)) {
      throw new CorruptJpeg(
        `marker FF ${hex(marker)} at offset ${at} is not one JPEG decoders read`,
      );
    }
    if (p + 2 > n) return scans;
    const length = (bytes[p] << 8) | bytes[p + 1];
    if (length < 2) {
      throw new CorruptJpeg(`the segment at offset ${at} has length ${length}`);
    }
    p += length;
    if (marker !== 0xda) continue;
    if (++scans > limit) return scans;
    // Entropy-coded data runs to the next marker other than a stuffed
    // 0xFF 0x00 or a restart marker; fill bytes may precede any marker.
    for (;;) {
      p = bytes.indexOf(0xff, p);
      if (p === -1) return scans;
      let q = p + 1;
      while (q < n && bytes[q] === 0xff) q++;
      if (q >= n) return scans;
      const next = bytes[q];
      if (next === 0x00 || (next >= 0xd0 && next <= 0xd7)) {
        p = q + 1;
        continue;
      }
      p = q - 1; // the last 0xFF before the marker byte
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
    let scans: number;
    try {
      scans = countJpegScans(bytes);
    } catch (error) {
      if (!(error instanceof CorruptJpeg)) throw error;
      throw new ToolError(
        "image",
        `${field}: the JPEG is corrupt: ${error.message}; re-saving it with an image editor ` +
          `usually fixes this`,
      );
    }
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
