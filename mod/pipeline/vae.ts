/**
 * The VAE at both ends of the loop: latents → image (decoder) and, for
 * image-to-image, upscaling and inpainting, image → latents (encoder). SD 1.5's latent scaling factor is
 * 0.18215 (diffusers' ONNX pipelines hard-code it, `pipeline_onnx_stable_diffusion.py`).
 *
 * @module
 */

import { floatTensor, type ResolvedIo, toFloat32 } from "../onnx/mod.ts";
import { decodedToRgb, rgbToNchwSigned } from "./image_tensors.ts";
import type { TorchGenerator } from "../random/mod.ts";
import type { ModelSession } from "./model_session.ts";
import type { RgbImage } from "./types.ts";

/** SD 1.5 `vae.config.scaling_factor`. */
export const VAE_SCALING_FACTOR = 0.18215;

const fround = Math.fround;
const SCALE_F32 = fround(VAE_SCALING_FACTOR);

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

/** `DiagonalGaussianDistribution`'s clamp of the log-variance (diffusers `models/autoencoders/vae.py`). */
const LOGVAR_MIN = -30;
const LOGVAR_MAX = 20;

/**
 * Encodes an RGB image to scaled latents `[1, 4, H/8, W/8]` the way diffusers'
 * image pipelines do (`_encode_vae_image` / `prepare_latents`:
 * `scaling_factor * retrieve_latents(vae.encode(image), generator)`):
 *
 * - input `2·(x/255) − 1` (`VaeImageProcessor.normalize`);
 * - from `latent_parameters` (mean ‖ logvar, what every encoder gives after
 *   the load-time rewrite of `mod/onnx` `exposeLatentParameters`),
 *   `DiagonalGaussianDistribution.sample(generator)`: `logvar = clamp(logvar,
 *   −30, 20)`, `std = exp(0.5·logvar)`, `mean + std·ε` with ε =
 *   `randn_tensor(mean.shape, generator)`, drawn here from `generator`, in
 *   float32 as torch computes it;
 * - from a `latent_sample` that no random node drew (an encoder that returns
 *   its mean), that value, and ε is still drawn so that every later draw of
 *   the request's generator is the one diffusers makes;
 * - then × 0.18215 (`vae.config.scaling_factor`).
 */
export async function encodeImage(
  session: ModelSession,
  io: ResolvedIo,
  image: RgbImage,
  generator: TorchGenerator,
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
  const parameters = io.vaeEncoderOutput === "latent_parameters";
  const expected = [1, parameters ? 8 : 4, h, w];
  if (latent.dims.join(",") !== expected.join(",")) {
    throw new Error(
      `vae_encoder output \`${output.name}\`: expected shape [${expected}], got [${latent.dims}]`,
    );
  }
  const values = toFloat32(latent);
  const n = 4 * h * w;
  const eps = generator.randn(n);
  const scaled = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    let x = values[i];
    if (parameters) {
      const logvar = Math.min(Math.max(values[n + i], LOGVAR_MIN), LOGVAR_MAX);
      const std = fround(Math.exp(fround(0.5 * logvar)));
      x = fround(x + fround(std * eps[i]));
    }
    scaled[i] = x * SCALE_F32;
  }
  return scaled;
}
