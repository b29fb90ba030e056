/**
 * Turning the UNet output into the predicted clean latent x0 (and back into
 * ε), as every diffusers scheduler does before its own update rule. The same
 * few lines stand in several diffusers classes: step 3 of
 * `DDIMScheduler.step` (scheduling_ddim.py) and `LCMScheduler.step`
 * (scheduling_lcm.py), `DPMSolverMultistepScheduler.convert_model_output`
 * (scheduling_dpmsolver_multistep.py), the v-prediction branch of
 * `PNDMScheduler._get_prev_sample` (scheduling_pndm.py), and step 1 of
 * `EulerDiscreteScheduler.step` / `EulerAncestralDiscreteScheduler.step`
 * (scheduling_euler_discrete.py, scheduling_euler_ancestral_discrete.py).
 *
 * @module
 */

import type { PredictionType } from "./scheduler_config.ts";

/**
 * x0 in the VP parameterisation x_t = α x0 + σ ε, with α = sqrt(ᾱ_t) and
 * σ = sqrt(1 − ᾱ_t) (DDIM, LCM) or DPM-Solver's (α_t, σ_t): epsilon
 * `(x − σ ε) / α` (DDIM formula (12)); v-prediction `α x − σ v`.
 *
 * @param prediction What the UNet predicts.
 * @param alpha α (`alpha_prod_t ** 0.5`, or DPM-Solver's `alpha_t`).
 * @param sigma σ (`beta_prod_t ** 0.5`, or DPM-Solver's `sigma_t`).
 * @param modelOutput The UNet output.
 * @param sample The current latent x_t.
 * @returns x0, a new array.
 */
export function predictOriginalVp(
  prediction: PredictionType,
  alpha: number,
  sigma: number,
  modelOutput: Float32Array,
  sample: Float32Array,
): Float32Array {
  return prediction === "epsilon"
    ? sample.map((x, i) => (x - sigma * modelOutput[i]) / alpha)
    : sample.map((x, i) => alpha * x - sigma * modelOutput[i]);
}

/**
 * ε from a v-prediction in the VP parameterisation: `α v + σ x`
 * (diffusers scheduling_ddim.py step 3, scheduling_pndm.py `_get_prev_sample`).
 *
 * @param alpha sqrt(ᾱ_t).
 * @param sigma sqrt(1 − ᾱ_t).
 * @param modelOutput The UNet's v-prediction.
 * @param sample The current latent x_t.
 * @returns ε, a new array.
 */
export function epsilonFromV(
  alpha: number,
  sigma: number,
  modelOutput: Float32Array,
  sample: Float32Array,
): Float32Array {
  return modelOutput.map((v, i) => alpha * v + sigma * sample[i]);
}

/**
 * `pred_original_sample.clamp(-clip_sample_range, clip_sample_range)`
 * (diffusers scheduling_ddim.py / scheduling_lcm.py step 4, `clip_sample=True`).
 *
 * @param x0 The predicted clean latent.
 * @param range The clip range (`clip_sample_range`).
 * @returns The clipped values, a new array.
 */
export function clipSample(x0: Float32Array, range: number): Float32Array {
  return x0.map((v) => Math.min(Math.max(v, -range), range));
}

/**
 * x0 at noise level σ for the sigma-space samplers (Euler and Euler
 * ancestral), whose latent is x0 + σ ε: epsilon `x − σ ε`; v-prediction
 * `v · (−σ / sqrt(σ²+1)) + x / (σ²+1)`.
 *
 * @param prediction What the UNet predicts.
 * @param sigma The step's sigma.
 * @param modelOutput The UNet output.
 * @param sample The current latent.
 * @returns x0, a new array.
 */
export function predictOriginalSigma(
  prediction: PredictionType,
  sigma: number,
  modelOutput: Float32Array,
  sample: Float32Array,
): Float32Array {
  if (prediction === "epsilon") return sample.map((x, i) => x - sigma * modelOutput[i]);
  const c = -sigma / Math.sqrt(sigma * sigma + 1);
  const d = sigma * sigma + 1;
  return sample.map((x, i) => modelOutput[i] * c + x / d);
}
