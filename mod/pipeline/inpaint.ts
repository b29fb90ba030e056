/**
 * The latent-space and pixel-space blending of inpainting with an ordinary
 * 4-channel UNet and the inpaint ControlNet (diffusers
 * `pipelines/controlnet/pipeline_controlnet_inpaint.py`).
 *
 * @module
 */

import type { Mask, RgbImage } from "./types.ts";
import { checkMask, checkRgb } from "./image_tensors.ts";

/**
 * The latent mask: the pixel mask resized to `width`×`height` (the latent
 * size) with nearest neighbour as `F.interpolate(mask, size=…)` does it
 * (mode "nearest": source index `floor(dst · in/out)`, here `8·dst`). One
 * value per latent position, 1 = regenerate.
 */
export function latentMask(mask: Mask, width: number, height: number): Uint8Array {
  if (mask.data.length !== mask.width * mask.height) {
    throw new RangeError(
      `mask: expected ${mask.width * mask.height} bytes, got ${mask.data.length}`,
    );
  }
  const out = new Uint8Array(width * height);
  const sy = mask.height / height;
  const sx = mask.width / width;
  for (let y = 0; y < height; y++) {
    const srcY = Math.min(Math.floor(y * sy), mask.height - 1);
    for (let x = 0; x < width; x++) {
      const srcX = Math.min(Math.floor(x * sx), mask.width - 1);
      out[y * width + x] = mask.data[srcY * mask.width + srcX] !== 0 ? 1 : 0;
    }
  }
  return out;
}

/**
 * `latents = (1 − m)·known + m·latents` per latent position for every
 * channel (pipeline_controlnet_inpaint.py L1457-1470). With a binary mask
 * this selects, so kept positions take `known` exactly. Writes into
 * `latents` and returns it.
 */
export function blendKnownLatents(
  latents: Float32Array,
  known: Float32Array,
  mask: Uint8Array,
): Float32Array {
  if (latents.length !== known.length || latents.length % mask.length !== 0) {
    throw new RangeError(
      `blendKnownLatents: latents ${latents.length}, known ${known.length}, mask ${mask.length} do not match`,
    );
  }
  const plane = mask.length;
  const channels = latents.length / plane;
  for (let c = 0; c < channels; c++) {
    const base = c * plane;
    for (let p = 0; p < plane; p++) if (mask[p] === 0) latents[base + p] = known[base + p];
  }
  return latents;
}

/**
 * Copies every unmasked pixel (mask = 0) from `original` into `generated`,
 * so black areas of the mask are kept exactly. Returns a new image.
 */
export function pasteUnmasked(generated: RgbImage, original: RgbImage, mask: Mask): RgbImage {
  checkRgb(generated, "generated image");
  checkRgb(original, "input image");
  if (generated.width !== original.width || generated.height !== original.height) {
    throw new RangeError(
      `input image is ${original.width}×${original.height}, generated ${generated.width}×${generated.height}`,
    );
  }
  checkMask(mask, generated.width, generated.height);
  const data = generated.data.slice();
  for (let p = 0; p < mask.data.length; p++) {
    if (mask.data[p] === 0) {
      data[p * 3] = original.data[p * 3];
      data[p * 3 + 1] = original.data[p * 3 + 1];
      data[p * 3 + 2] = original.data[p * 3 + 2];
    }
  }
  return { width: generated.width, height: generated.height, data };
}
