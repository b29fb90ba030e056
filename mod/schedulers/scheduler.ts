/**
 * The scheduler interface the SD pipeline drives, shaped after diffusers'
 * `SchedulerMixin` (`set_timesteps`, `scale_model_input`, `step`,
 * `add_noise`, `timesteps`, `init_noise_sigma`). Latents are flat
 * `Float32Array`s in NCHW order, batch 1.
 *
 * @module
 */

import type { TorchGenerator } from "../random/mod.ts";

/** The schedulers this project offers. */
export type SchedulerName = "pndm" | "ddim" | "euler" | "euler_a" | "dpmpp_2m" | "lcm" | "tcd";

/** Every {@link SchedulerName}, in a stable order. */
export const SCHEDULER_NAMES: readonly SchedulerName[] = [
  "pndm",
  "ddim",
  "euler",
  "euler_a",
  "dpmpp_2m",
  "lcm",
  "tcd",
];

/** What one {@link Scheduler.step} produced. */
export interface StepResult {
  /** The latent for the next UNet call (or the final latent after the last step). */
  prevSample: Float32Array;
  /**
   * The predicted denoised latent x0, where the diffusers scheduler returns
   * one (`pred_original_sample`; LCM's `denoised`, which its pipeline decodes).
   */
  predOriginalSample?: Float32Array;
}

/**
 * One diffusion sampler with its per-run state (multistep history, step
 * index). `setTimesteps` must be called before the first `step` and resets
 * that state; a scheduler instance serves one generation at a time.
 */
export interface Scheduler {
  /** Which algorithm this is. */
  readonly name: SchedulerName;
  /**
   * After {@link setTimesteps}: the timestep passed to the UNet on each call,
   * in order (PNDM/PLMS has N+1 entries, its second timestep repeated).
   * Euler-family timesteps are float32 values and may be fractional.
   */
  readonly timesteps: number[];
  /** Standard deviation of the initial noise: initial latents are `randn * initNoiseSigma`. */
  readonly initNoiseSigma: number;
  /** Computes the timesteps for `numInferenceSteps` denoising steps and resets per-run state. */
  setTimesteps(numInferenceSteps: number): void;
  /** Scales the latent before it is fed to the UNet at timestep `t` (identity for most). */
  scaleModelInput(sample: Float32Array, t: number): Float32Array;
  /**
   * One denoising step from the UNet output at timestep `t`. Stochastic
   * schedulers (euler_a, lcm, ddim and tcd with eta > 0) draw `generator.randn`
   * noise in the order diffusers does and throw when `generator` is missing.
   * Inputs are not modified.
   */
  step(
    modelOutput: Float32Array,
    t: number,
    sample: Float32Array,
    generator?: TorchGenerator,
  ): StepResult;
  /** Noises a clean latent to the level of timestep `t` (`add_noise`). */
  addNoise(original: Float32Array, noise: Float32Array, t: number): Float32Array;
}
