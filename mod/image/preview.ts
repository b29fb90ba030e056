/**
 * A smaller rendition of a PNG the server made, for a tool result that
 * cannot carry the PNG itself (see mod/jobs/delivery.ts): the largest
 * picture within a byte budget that a model can still look at. A JPEG at
 * the full size first, at the highest of a few qualities that fits (a
 * photographic 512×512 PNG of ~400 KB is ~60–100 KB as a quality-90 JPEG);
 * when none fits, the picture made smaller with the project's Lanczos
 * ({@link resizeRgb}) until it fits, as a PNG where that fits (lossless;
 * flat or blocky pictures compress better as PNG than as JPEG), else as a
 * JPEG.
 *
 * @module
 */

import { readPngHeader } from "./png_header.ts";
import { resizeRgb } from "./resize.ts";
import { decodeRgb, encodeRawJpeg, encodeRawPng } from "./sharp.ts";

/** A rendition of a PNG: its bytes, type and size. */
export interface Preview {
  /** The encoded image. */
  bytes: Uint8Array;
  /** `image/jpeg`, or `image/png` for a reduced picture that fits as one. */
  mimeType: "image/jpeg" | "image/png";
  /** Width in pixels. */
  width: number;
  /** Height in pixels. */
  height: number;
}

/** JPEG qualities tried at the full size, best first (libjpeg's 1–100 scale). */
export const PREVIEW_QUALITIES: readonly number[] = [90, 80, 70, 60];

/** The quality of a reduced-size preview. */
const REDUCED_QUALITY = 75;

/** A preview is never made narrower than this on its short side. */
export const MIN_PREVIEW_SIDE = 32;

/** Width and height of a PNG, from its IHDR. */
export function pngDimensions(png: Uint8Array): { width: number; height: number } {
  const { width, height } = readPngHeader(png);
  return { width, height };
}

/**
 * The largest rendition of `png` of at most `maxBytes` bytes (see the
 * module documentation). Throws `RangeError` when even a
 * {@link MIN_PREVIEW_SIDE}-pixel rendition does not fit.
 */
export async function previewWithin(png: Uint8Array, maxBytes: number): Promise<Preview> {
  const full = await decodeRgb(png);
  let smallest = png.length;
  for (const quality of PREVIEW_QUALITIES) {
    const bytes = await encodeRawJpeg(full, quality);
    if (bytes.length <= maxBytes) {
      return { bytes, mimeType: "image/jpeg", width: full.width, height: full.height };
    }
    smallest = Math.min(smallest, bytes.length);
  }
  // Encoded bytes grow about with the pixel count: aim a little below the budget, then step down.
  let scale = Math.sqrt(maxBytes / smallest) * 0.9;
  for (;;) {
    const width = Math.max(1, Math.round(full.width * scale));
    const height = Math.max(1, Math.round(full.height * scale));
    if (Math.min(width, height) < MIN_PREVIEW_SIDE) {
      throw new RangeError(
        `a ${full.width}x${full.height} image has no preview of at most ${maxBytes} bytes ` +
          `(${MIN_PREVIEW_SIDE} px on its short side at the least)`,
      );
    }
    const small = await resizeRgb(
      { width: full.width, height: full.height, data: full.data },
      width,
      height,
      "lanczos3",
    );
    const raw = { ...small, channels: 3 };
    const lossless = await encodeRawPng(raw);
    if (lossless.length <= maxBytes) {
      return { bytes: lossless, mimeType: "image/png", width, height };
    }
    const bytes = await encodeRawJpeg(raw, REDUCED_QUALITY);
    if (bytes.length <= maxBytes) return { bytes, mimeType: "image/jpeg", width, height };
    scale *= 0.85;
  }
}
