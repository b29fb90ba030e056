/**
 * Sigma-space helpers shared by the Euler, Euler-ancestral and DPM-Solver
 * schedulers (huggingface/diffusers `scheduling_euler_discrete.py`,
 * `scheduling_dpmsolver_multistep.py`): Karras sigmas, sigma → timestep
 * inversion, the timestep → step-index lookup, and the Euler family's
 * `init_noise_sigma` and input scaling.
 *
 * @module
 */

import { npLinspace } from "./numeric.ts";
import type { TimestepSpacing } from "./scheduler_config.ts";

const fround = Math.fround;

/**
 * `init_noise_sigma` of the Euler samplers (scheduling_euler_discrete.py,
 * scheduling_euler_ancestral_discrete.py): the largest sigma for
 * linspace/trailing spacing, else `sqrt(max² + 1)`, in float32; 1 before
 * `set_timesteps` (no sigmas yet).
 */
export function eulerInitNoiseSigma(sigmas: readonly number[], spacing: TimestepSpacing): number {
  if (sigmas.length === 0) return 1;
  const max = Math.max(...sigmas);
  if (spacing === "linspace" || spacing === "trailing") return max;
  return fround(Math.sqrt(fround(fround(max * max) + 1)));
}

/**
 * `scale_model_input` of the Euler samplers: `sample / sqrt(σ² + 1)`, the
 * divisor computed in float32 as torch does.
 */
export function scaleBySigma(sample: Float32Array, sigma: number): Float32Array {
  const divisor = fround(Math.sqrt(fround(fround(sigma * sigma) + 1)));
  return sample.map((x) => x / divisor);
}

/**
 * `_convert_to_karras` (Karras et al. 2022, eq. 5, rho = 7):
 * `(max^(1/ρ) + ramp * (min^(1/ρ) - max^(1/ρ)))^ρ` with
 * `ramp = np.linspace(0, 1, n)`, in float64.
 */
export function karrasSigmas(sigmaMin: number, sigmaMax: number, n: number): number[] {
  const rho = 7;
  const minInvRho = sigmaMin ** (1 / rho);
  const maxInvRho = sigmaMax ** (1 / rho);
  return npLinspace(0, 1, n).map((r) => (maxInvRho + r * (minInvRho - maxInvRho)) ** rho);
}

/**
 * `_sigma_to_t`: the fractional training timestep whose log-sigma matches,
 * by linear interpolation in log-sigma between the two bracketing training
 * timesteps (clamped to the table). `logSigmas` ascend with the timestep.
 */
export function sigmaToT(sigma: number, logSigmas: ArrayLike<number>): number {
  const logSigma = Math.log(Math.max(sigma, 1e-10));
  const n = logSigmas.length;
  // cumsum(dists >= 0).argmax(): the last index whose log-sigma <= logSigma (0 if none).
  let count = 0;
  while (count < n && logSigma - logSigmas[count] >= 0) count++;
  const lowIdx = Math.min(Math.max(count - 1, 0), n - 2);
  const highIdx = lowIdx + 1;
  const low = logSigmas[lowIdx];
  const high = logSigmas[highIdx];
  const w = Math.min(Math.max((low - logSigma) / (low - high), 0), 1);
  return (1 - w) * lowIdx + w * highIdx;
}

/**
 * `index_for_timestep`: the position of `t` in the schedule; when `t` occurs
 * more than once the second occurrence (diffusers: "so that we don't
 * accidentally skip a sigma" when starting mid-schedule for img2img).
 *
 * @param whenMissing `"error"` (Euler: diffusers raises) or `"last"`
 *   (DPM-Solver: the last index).
 */
export function indexForTimestep(
  timesteps: readonly number[],
  t: number,
  whenMissing: "error" | "last",
): number {
  const first = timesteps.indexOf(t);
  if (first === -1) {
    if (whenMissing === "last") return timesteps.length - 1;
    throw new RangeError(
      `timestep ${t} is not in this scheduler's timesteps [${timesteps.join(", ")}]`,
    );
  }
  const second = timesteps.indexOf(t, first + 1);
  return second === -1 ? first : second;
}
