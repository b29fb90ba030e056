/**
 * The starting point of the denoising loop: torch-compatible Gaussian noise
 * in the latent shape, scaled by the scheduler's `init_noise_sigma`.
 *
 * @module
 */

import type { TorchGenerator } from "../random/mod.ts";

/** SD 1.5's VAE downsamples by 8 (three stride-2 stages). */
export const LATENT_SCALE = 8;

/** SD 1.5's latent channels. */
export const LATENT_CHANNELS = 4;

/** Latent dims `[1, 4, H/8, W/8]` of an image size; both sides must be multiples of 8. */
export function latentDims(width: number, height: number): [number, number, number, number] {
  for (const [name, v] of [["width", width], ["height", height]] as const) {
    if (!Number.isInteger(v) || v < LATENT_SCALE || v % LATENT_SCALE !== 0) {
      throw new RangeError(`${name} must be a positive multiple of 8, got ${v}`);
    }
  }
  return [1, LATENT_CHANNELS, height / LATENT_SCALE, width / LATENT_SCALE];
}

/**
 * The initial noise: `torch.randn((1, 4, h/8, w/8), generator=g)` drawn from
 * `generator` (which continues to be used by stochastic schedulers, in
 * diffusers' order: diffusers `prepare_latents` → `randn_tensor`).
 */
export function initialNoise(
  generator: TorchGenerator,
  width: number,
  height: number,
): Float32Array {
  const [, c, h, w] = latentDims(width, height);
  return generator.randn(c * h * w);
}

/** `noise · init_noise_sigma` in float32 (diffusers `prepare_latents`). */
export function scaleNoise(noise: Float32Array, initNoiseSigma: number): Float32Array {
  const out = new Float32Array(noise.length);
  const s = Math.fround(initNoiseSigma);
  for (let i = 0; i < noise.length; i++) out[i] = noise[i] * s;
  return out;
}
