/**
 * Conversions between 8-bit RGB images and the float NCHW tensors the VAE
 * and ControlNets take or give.
 *
 * @module
 */

import type { Mask, RgbImage } from "./types.ts";

const fround = Math.fround;

/** Throws unless `image.data` holds exactly width × height × 3 bytes. */
export function checkRgb(image: RgbImage, what: string): void {
  if (
    !Number.isInteger(image.width) || !Number.isInteger(image.height) || image.width < 1 ||
    image.height < 1 || image.data.length !== image.width * image.height * 3
  ) {
    throw new RangeError(
      `${what}: expected ${image.width}×${image.height}×3 = ${
        image.width * image.height * 3
      } bytes, got ${image.data.length}`,
    );
  }
}

/** Throws unless the mask holds one byte per pixel of a width × height image. */
export function checkMask(mask: Mask, width: number, height: number): void {
  if (mask.width !== width || mask.height !== height) {
    throw new RangeError(`mask is ${mask.width}×${mask.height}, expected ${width}×${height}`);
  }
  if (mask.data.length !== width * height) {
    throw new RangeError(`mask: expected ${width * height} bytes, got ${mask.data.length}`);
  }
}

/**
 * RGB in [0, 1], NCHW `[1, 3, H, W]`: `np.array(img).astype(np.float32) / 255`
 * and a transpose, as diffusers' `VaeImageProcessor(do_normalize=False)`
 * prepares ControlNet images (`VaeImageProcessor(do_normalize=False)`). With `mask`, masked pixels
 * (mask = 1) are set to −1 on every channel: the control image of
 * control_v11p_sd15_inpaint (diffusers `docs/source/en/using-diffusers/inpaint.md`,
 * `image[image_mask > 0.5] = -1.0`).
 */
export function rgbToNchw01(image: RgbImage, mask?: Mask): Float32Array {
  checkRgb(image, "control image");
  const { width, height, data } = image;
  if (mask) checkMask(mask, width, height);
  const plane = width * height;
  const out = new Float32Array(3 * plane);
  for (let p = 0; p < plane; p++) {
    const masked = mask !== undefined && mask.data[p] !== 0;
    for (let c = 0; c < 3; c++) {
      out[c * plane + p] = masked ? -1 : fround(data[p * 3 + c] / 255);
    }
  }
  return out;
}

/**
 * RGB in [−1, 1], NCHW `[1, 3, H, W]`, the VAE encoder's input: `x / 255`
 * then `2x − 1` in float32 (diffusers `VaeImageProcessor.normalize`).
 */
export function rgbToNchwSigned(image: RgbImage): Float32Array {
  const out = rgbToNchw01(image);
  for (let i = 0; i < out.length; i++) out[i] = fround(fround(2 * out[i]) - 1);
  return out;
}

/**
 * The VAE decoder's `[1, 3, H, W]` output in about [−1, 1] to 8-bit RGB:
 * `clip(x/2 + 0.5, 0, 1)` (float32), then `(x·255).round()` with numpy's
 * round-half-to-even (diffusers `pipeline_onnx_stable_diffusion.py` and
 * `utils/pil_utils.py` `numpy_to_pil`).
 */
export function decodedToRgb(sample: Float32Array, width: number, height: number): RgbImage {
  const plane = width * height;
  if (sample.length !== 3 * plane) {
    throw new RangeError(
      `VAE decoder output: expected 3×${height}×${width} = ${
        3 * plane
      } values, got ${sample.length}`,
    );
  }
  const data = new Uint8Array(3 * plane);
  for (let c = 0; c < 3; c++) {
    for (let p = 0; p < plane; p++) {
      const x = sample[c * plane + p];
      let v = fround(fround(x / 2) + 0.5);
      if (!(v > 0)) v = 0; // NaN clips to 0 as well
      else if (v > 1) v = 1;
      data[p * 3 + c] = roundHalfEven(fround(v * 255));
    }
  }
  return { width, height, data };
}

/** numpy's `round`: to nearest, ties to even. */
export function roundHalfEven(x: number): number {
  const r = Math.round(x);
  // Math.round rounds ties up; an exact .5 whose rounded value is odd goes down.
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** Repeats a `[1, …]` tensor's data `times` times along the batch axis. */
export function repeatBatch(data: Float32Array, times: number): Float32Array {
  if (times === 1) return data;
  const out = new Float32Array(data.length * times);
  for (let i = 0; i < times; i++) out.set(data, i * data.length);
  return out;
}
