/**
 * Resizing of in-memory RGB images for other modules (e.g. preprocessors
 * that need a bilinear or Lanczos resize of an {@link RgbImage}).
 *
 * @module
 */

import type { RgbImage } from "../pipeline/types.ts";
import { type ResizeKernel, resizeRaw } from "./sharp.ts";

export type { ResizeKernel } from "./sharp.ts";

/**
 * Stretches `image` to `width`×`height` (aspect ratio not kept) with
 * `kernel`: `lanczos3` (Lanczos, a = 3), `nearest`, `linear` (bilinear) or
 * `cubic` (Catmull-Rom bicubic), as libvips implements them. Returns a new
 * image; the input is not modified. Throws `RangeError` for a malformed
 * image or a non-positive target size.
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
  const raw = await resizeRaw({ ...image, channels: 3 }, width, height, kernel);
  return { width: raw.width, height: raw.height, data: raw.data };
}
