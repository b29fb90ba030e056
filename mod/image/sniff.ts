/**
 * Format detection from magic bytes and the header checks that run before
 * any pixel decoding: declared vs detected format, dimensions and the pixel
 * limit. A PNG whose IHDR claims 100000×100000 is rejected here, after
 * reading 33 bytes, without allocating anything for pixels.
 *
 * @module
 */

import { ToolError } from "../mcp/tool.ts";
import { readJpegHeader } from "./jpeg_header.ts";
import { formatCount, MAX_PIXELS } from "./limits.ts";
import { PNG_SIGNATURE, readPngHeader } from "./png_header.ts";
import type { ImageField, ImageFormat } from "./types.ts";

/** Format names for messages. */
export const FORMAT_NAMES: Readonly<Record<ImageFormat, string>> = { png: "PNG", jpeg: "JPEG" };

function startsWith(bytes: Uint8Array, prefix: ArrayLike<number>, at = 0): boolean {
  if (bytes.length < at + prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (bytes[at + i] !== prefix[i]) return false;
  return true;
}

function ascii(text: string): number[] {
  return Array.from(text, (c) => c.charCodeAt(0));
}

/** The detected format from the magic bytes, or null if neither PNG nor JPEG. */
export function sniffFormat(bytes: Uint8Array): ImageFormat | null {
  if (startsWith(bytes, PNG_SIGNATURE)) return "png";
  // SOI (FF D8) followed by the first marker's FF (ITU-T T.81 §B.1.1.2).
  if (startsWith(bytes, [0xff, 0xd8, 0xff])) return "jpeg";
  return null;
}

/**
 * A short guess at what unsupported bytes are ("GIF", "WebP", …), or a hex
 * dump of the first bytes when nothing matches.
 */
export function describeUnknown(bytes: Uint8Array): string {
  if (bytes.length === 0) return "no bytes";
  if (startsWith(bytes, ascii("GIF87a")) || startsWith(bytes, ascii("GIF89a"))) return "GIF";
  if (startsWith(bytes, ascii("RIFF")) && startsWith(bytes, ascii("WEBP"), 8)) return "WebP";
  if (startsWith(bytes, ascii("BM"))) return "BMP";
  if (startsWith(bytes, [0x49, 0x49, 0x2a, 0x00]) || startsWith(bytes, [0x4d, 0x4d, 0x00, 0x2a])) {
    return "TIFF";
  }
  if (startsWith(bytes, ascii("ftyp"), 4)) {
    return startsWith(bytes, ascii("avif"), 8) ? "AVIF" : "HEIF/ISO media";
  }
  if (startsWith(bytes, ascii("%PDF"))) return "PDF";
  if (startsWith(bytes, [0x00, 0x00, 0x01, 0x00])) return "ICO";
  // Base64 of a PNG ("iVBOR") or JPEG ("/9j/") decoded once more: the
  // caller encoded twice.
  if (startsWith(bytes, ascii("iVBOR")) || startsWith(bytes, ascii("/9j/"))) {
    return "base64 text (the image seems to be base64-encoded twice)";
  }
  const text = Array.from(bytes.subarray(0, 8), (b) => b.toString(16).padStart(2, "0")).join(" ");
  if (bytes[0] === 0x3c) return `text starting with "<" (SVG/HTML/XML?; first bytes ${text})`;
  return `unrecognised data (first bytes ${text})`;
}

/** Dimensions and format read from a file header. */
export interface ImageHeaderInfo {
  format: ImageFormat;
  width: number;
  height: number;
}

/**
 * Detects the format of `bytes`, compares it with the data URI's declared
 * format (if any), reads the dimensions from the header and enforces
 * {@link MAX_PIXELS}. Throws `ToolError("image")` naming `field`.
 */
export function inspectImage(
  field: ImageField,
  bytes: Uint8Array,
  declared: ImageFormat | null,
  declaredType: string | null = null,
): ImageHeaderInfo {
  const format = sniffFormat(bytes);
  if (format === null) {
    throw new ToolError(
      "image",
      `${field}: unsupported image format: the data looks like ${
        describeUnknown(bytes)
      }; only PNG and JPEG are accepted`,
    );
  }
  if (declared !== null && declared !== format) {
    throw new ToolError(
      "image",
      `${field}: the data URI declares ${
        declaredType ?? FORMAT_NAMES[declared]
      } but the bytes are ${
        FORMAT_NAMES[format]
      }; use data:image/${format};base64, or send raw base64`,
    );
  }
  let width: number;
  let height: number;
  try {
    ({ width, height } = format === "png" ? readPngHeader(bytes) : readJpegHeader(bytes));
  } catch (error) {
    throw new ToolError("image", `${field}: ${(error as Error).message}`);
  }
  // Both factors are < 2^31; the float product may round above 2^53, but
  // only far beyond the limit, so the comparison is still exact.
  const pixels = width * height;
  if (pixels > MAX_PIXELS) {
    throw new ToolError(
      "image",
      `${field}: the ${FORMAT_NAMES[format]} header declares ${width}×${height} = ${
        formatCount(pixels)
      } pixels; the limit is ${formatCount(MAX_PIXELS)} pixels`,
    );
  }
  return { format, width, height };
}
