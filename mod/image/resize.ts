/**
 * Resizing of in-memory RGB images for other modules (e.g. preprocessors
 * that need a Lanczos or bilinear resize of an {@link RgbImage}).
 *
 * `lanczos3` and `nearest` are PIL's `LANCZOS` and `NEAREST`, reproduced
 * exactly (`lanczos.ts`, `nearest.ts`), the filters the reference pipeline
 * resizes its inputs with; `linear` and `cubic` are libvips' (sharp).
 *
 * @module
 */

import type { RgbImage } from "../pipeline/types.ts";
import { resizeLanczos } from "./lanczos.ts";
import { resizeNearest } from "./nearest.ts";
import { resizeRaw } from "./sharp.ts";

/**
 * Resampling kernels of {@link resizeRgb}: `lanczos3` (PIL `LANCZOS`,
 * a = 3), `nearest` (PIL `NEAREST`), `linear` (libvips bilinear) and
 * `cubic` (libvips Catmull-Rom bicubic).
 */
export type ResizeKernel = "lanczos3" | "nearest" | "linear" | "cubic";

/**
 * Stretches `image` to `width`×`height` (aspect ratio not kept) with
 * `kernel` (see {@link ResizeKernel}). Returns a new image; the input is not
 * modified. Throws `RangeError` for a malformed image or a non-positive
 * target size.
 */
export async function resizeRgb(
  image: RgbImage,
  width: number,
  height: number,
  kernel: ResizeKernel,
): Promise<RgbImage> {
  if (image.data.length !== image.width * image.height * 3 || image.width < 1 || image.height < 1) {
    throw new RangeError(
      `resizeRgb: image is ${image.width}×${image.height} but has ${image.data.length} bytes, expected ${
        image.width * image.height * 3
      }`,
    );
  }
  if (!Number.isInteger(width) || !Number.isInteger(height) || width < 1 || height < 1) {
    throw new RangeError(
      `resizeRgb: target size must be positive integers, got ${width}×${height}`,
    );
  }
  const pixels = { ...image, channels: 3 };
  const raw = kernel === "lanczos3"
    ? resizeLanczos(pixels, width, height)
    : kernel === "nearest"
    ? resizeNearest(pixels, width, height)
    : await resizeRaw(pixels, width, height, kernel);
  return { width: raw.width, height: raw.height, data: raw.data };
}
