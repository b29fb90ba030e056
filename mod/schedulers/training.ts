/**
 * The training noise schedule a scheduler is built on: config values, else
 * the diffusers class's own defaults, turned into float32 `alphas_cumprod`.
 *
 * @module
 */

import { alphasCumprod, makeBetas } from "./betas.ts";
import type { BetaSchedule, SchedulerConfig } from "./scheduler_config.ts";

/** A diffusers class's `__init__` defaults for the beta schedule. */
export interface TrainingDefaults {
  numTrainTimesteps: number;
  betaStart: number;
  betaEnd: number;
  betaSchedule: BetaSchedule;
}

/** The defaults shared by PNDM, DDIM, Euler, Euler a and DPM-Solver (`linear`, 1e-4..0.02). */
export const LINEAR_DEFAULTS: TrainingDefaults = {
  numTrainTimesteps: 1000,
  betaStart: 0.0001,
  betaEnd: 0.02,
  betaSchedule: "linear",
};

/** The resolved training schedule. */
export interface TrainingSchedule {
  numTrainTimesteps: number;
  /** `alphas_cumprod`, float32, index = training timestep. */
  alphasCumprod: Float32Array;
}

/** Builds the training schedule from a config, falling back to `defaults` per key. */
export function trainingSchedule(
  config: SchedulerConfig,
  defaults: TrainingDefaults,
): TrainingSchedule {
  const numTrainTimesteps = config.numTrainTimesteps ?? defaults.numTrainTimesteps;
  const betas = makeBetas(
    config.betaSchedule ?? defaults.betaSchedule,
    config.betaStart ?? defaults.betaStart,
    config.betaEnd ?? defaults.betaEnd,
    numTrainTimesteps,
  );
  return { numTrainTimesteps, alphasCumprod: alphasCumprod(betas) };
}

/**
 * The ᾱ at an integer training timestep.
 *
 * @throws RangeError when `t` is not an integer in [0, T).
 */
export function alphaAt(alphasCumprod: Float32Array, t: number): number {
  if (!Number.isInteger(t) || t < 0 || t >= alphasCumprod.length) {
    throw new RangeError(
      `timestep must be an integer in 0..${alphasCumprod.length - 1}, got ${t}`,
    );
  }
  return alphasCumprod[t];
}

/**
 * `final_alpha_cumprod`: the ᾱ used past the end of the schedule, 1 when
 * `set_alpha_to_one`, else ᾱ_0 (diffusers scheduling_ddim.py, scheduling_pndm.py,
 * scheduling_lcm.py `__init__`; the class defaults differ, so the caller
 * resolves the flag).
 */
export function finalAlphaCumprod(alphasCumprod: Float32Array, setAlphaToOne: boolean): number {
  return setAlphaToOne ? 1 : alphasCumprod[0];
}

/**
 * `alpha_prod_t_prev`: ᾱ at the previous timestep, or `final_alpha_cumprod`
 * when that timestep is negative (diffusers scheduling_ddim.py `step` step 2,
 * scheduling_pndm.py `_get_prev_sample`, scheduling_lcm.py `step` step 2).
 *
 * @throws RangeError when `prevT` is not negative and not a timestep in [0, T).
 */
export function alphaPrevAt(alphasCumprod: Float32Array, prevT: number, final: number): number {
  return prevT >= 0 ? alphaAt(alphasCumprod, prevT) : final;
}

/**
 * DDPM-style `add_noise` (PNDM, DDIM, LCM; e.g. diffusers scheduling_ddim.py):
 * `sqrt(ᾱ_t) * original + sqrt(1 - ᾱ_t) * noise`, every operation rounded to
 * float32 as torch computes it on float32 tensors (`alphas_cumprod[t] ** 0.5`,
 * `(1 - alphas_cumprod[t]) ** 0.5`, two products, one sum).
 */
export function addNoiseAlpha(
  alphasCumprod: Float32Array,
  original: Float32Array,
  noise: Float32Array,
  t: number,
): Float32Array {
  const fround = Math.fround;
  const a = alphaAt(alphasCumprod, t);
  const sa = fround(Math.sqrt(a)), sb = fround(Math.sqrt(fround(1 - a)));
  return original.map((x, i) => fround(sa * x) + fround(sb * noise[i]));
}
