/**
 * The VAE at both ends of the loop: latents → image (decoder) and, for
 * inpainting, image → latents (encoder). SD 1.5's latent scaling factor is
 * 0.18215 (diffusers' ONNX pipelines hard-code it, sd15-onnx.md §1d).
 *
 * @module
 */

import { floatTensor, type ResolvedIo, toFloat32 } from "../onnx/mod.ts";
import { decodedToRgb, rgbToNchwSigned } from "./image_tensors.ts";
import type { ModelSession } from "./model_session.ts";
import type { RgbImage } from "./types.ts";

/** SD 1.5 `vae.config.scaling_factor`. */
export const VAE_SCALING_FACTOR = 0.18215;

const SCALE_F32 = Math.fround(VAE_SCALING_FACTOR);

/**
 * Decodes one latent `[1, 4, h, w]` to an 8×-sized RGB image:
 * `latents / scale` (SD 1.5's 0.18215 by default; 1 for TAESD, whose
 * decoder takes the UNet's latents as they are) → decoder →
 * `clip(x/2 + 0.5, 0, 1)` → `round(x·255)`.
 * One sample per run, as diffusers' ONNX pipeline decodes ("strange result
 * for using half-precision vae decoder if batchsize>1").
 */
export async function decodeLatents(
  session: ModelSession,
  io: ResolvedIo,
  latents: Float32Array,
  dims: readonly number[],
  scale: number = VAE_SCALING_FACTOR,
): Promise<RgbImage> {
  const [batch, channels, h, w] = dims;
  if (batch !== 1 || latents.length !== channels * h * w) {
    throw new RangeError(
      `decodeLatents: expected one latent [1,${channels},${h},${w}], got [${dims}]`,
    );
  }
  const divisor = scale === VAE_SCALING_FACTOR ? SCALE_F32 : Math.fround(scale);
  const unscaled = divisor === 1 ? Float32Array.from(latents) : new Float32Array(latents.length);
  if (divisor !== 1) {
    for (let i = 0; i < latents.length; i++) {
      unscaled[i] = latents[i] / divisor;
    }
  }
  const input = io.inputs.latent_sample;
  const output = io.outputs.sample;
  const out = await session.run(
    { [input.name]: floatTensor(input.dtype, unscaled, dims) },
    [output.name],
  );
  const sample = out[output.name];
  const expected = [1, 3, h * 8, w * 8];
  if (sample.dims.join(",") !== expected.join(",")) {
    throw new Error(
      `vae_decoder output \`${output.name}\`: expected shape [${expected}], got [${sample.dims}]`,
    );
  }
  return decodedToRgb(toFloat32(sample), w * 8, h * 8);
}

/**
 * Encodes an RGB image to scaled latents `[1, 4, H/8, W/8]`: input
 * `2·(x/255) − 1`; a `latent_parameters` output (Optimum ≥ 1.23, mean ‖
 * logvar) gives its mean, the first 4 channels (`DiagonalGaussianDistribution.mode()`),
 * a `latent_sample` output is used as given; then × 0.18215 (diffusers
 * `pipeline_controlnet_inpaint.py` `_encode_vae_image`).
 */
export async function encodeImage(
  session: ModelSession,
  io: ResolvedIo,
  image: RgbImage,
): Promise<Float32Array> {
  const input = io.inputs.sample;
  const output = io.outputs.latent;
  const out = await session.run(
    {
      [input.name]: floatTensor(input.dtype, rgbToNchwSigned(image), [
        1,
        3,
        image.height,
        image.width,
      ]),
    },
    [output.name],
  );
  const latent = out[output.name];
  const h = image.height / 8;
  const w = image.width / 8;
  const channels = io.vaeEncoderOutput === "latent_parameters" ? 8 : 4;
  const expected = [1, channels, h, w];
  if (latent.dims.join(",") !== expected.join(",")) {
    throw new Error(
      `vae_encoder output \`${output.name}\`: expected shape [${expected}], got [${latent.dims}]`,
    );
  }
  const values = toFloat32(latent);
  const mean = new Float32Array(4 * h * w);
  for (let i = 0; i < mean.length; i++) mean[i] = values[i] * SCALE_F32;
  return mean;
}
