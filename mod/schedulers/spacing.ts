/**
 * Inference timesteps for each `timestep_spacing`, exactly as each diffusers
 * class's `set_timesteps` defines them — the classes differ in rounding, in
 * dtype and (DPM-Solver) in using N+1 points (huggingface/diffusers
 * `src/diffusers/schedulers/scheduling_*.py`). T is `num_train_timesteps`,
 * N the number of inference steps.
 *
 * @module
 */

import type { TimestepSpacing } from "./scheduler_config.ts";
import { npArange, npLinspace, roundHalfEven } from "./numeric.ts";

const fround = Math.fround;

/** Throws unless 1 <= N <= T. */
export function checkStepCount(numInferenceSteps: number, numTrainTimesteps: number): void {
  if (!Number.isInteger(numInferenceSteps) || numInferenceSteps < 1) {
    throw new RangeError(
      `numInferenceSteps must be a positive integer, got ${numInferenceSteps}`,
    );
  }
  if (numInferenceSteps > numTrainTimesteps) {
    throw new RangeError(
      `numInferenceSteps (${numInferenceSteps}) cannot exceed num_train_timesteps (${numTrainTimesteps})`,
    );
  }
}

/** `np.arange(0, n) * k` as plain numbers. */
function multiples(n: number, k: number): number[] {
  return Array.from({ length: n }, (_, i) => i * k);
}

/**
 * `PNDMScheduler._timesteps` (scheduling_pndm.py), ascending integers:
 * linspace `linspace(0, T-1, N).round()`; leading `arange(N) * (T // N) + steps_offset`;
 * trailing `round(arange(T, 0, -T/N))[::-1] - 1`.
 */
export function pndmBaseTimesteps(
  spacing: TimestepSpacing,
  numTrainTimesteps: number,
  numInferenceSteps: number,
  stepsOffset: number,
): number[] {
  const T = numTrainTimesteps, N = numInferenceSteps;
  switch (spacing) {
    case "linspace":
      return npLinspace(0, T - 1, N).map(roundHalfEven);
    case "leading":
      return multiples(N, Math.floor(T / N)).map((t) => t + stepsOffset);
    case "trailing":
      return npArange(T, 0, -T / N).map((t) => roundHalfEven(t) - 1).reverse();
  }
}

/**
 * `DDIMScheduler.timesteps` (scheduling_ddim.py; LCM has its own schedule),
 * descending integers: linspace `linspace(0, T-1, N).round()[::-1]`; leading
 * `(arange(N) * (T // N)).round()[::-1] + steps_offset`; trailing
 * `round(arange(T, 0, -T/N)) - 1`.
 */
export function ddimTimesteps(
  spacing: TimestepSpacing,
  numTrainTimesteps: number,
  numInferenceSteps: number,
  stepsOffset: number,
): number[] {
  const T = numTrainTimesteps, N = numInferenceSteps;
  switch (spacing) {
    case "linspace":
      return npLinspace(0, T - 1, N).map(roundHalfEven).reverse();
    case "leading":
      return multiples(N, Math.floor(T / N)).reverse().map((t) => t + stepsOffset);
    case "trailing":
      return npArange(T, 0, -T / N).map((t) => roundHalfEven(t) - 1);
  }
}

/**
 * `EulerDiscreteScheduler` / `EulerAncestralDiscreteScheduler` timesteps
 * (scheduling_euler_discrete.py, scheduling_euler_ancestral_discrete.py),
 * descending float32 values — fractional under linspace:
 * linspace `np.linspace(0, T-1, N, dtype=float32)[::-1]`; leading
 * `(arange(N) * (T // N)).round()[::-1].astype(float32) + steps_offset`;
 * trailing `arange(T, 0, -T/N).round().astype(float32) - 1`.
 */
export function eulerTimesteps(
  spacing: TimestepSpacing,
  numTrainTimesteps: number,
  numInferenceSteps: number,
  stepsOffset: number,
): number[] {
  const T = numTrainTimesteps, N = numInferenceSteps;
  switch (spacing) {
    case "linspace":
      return npLinspace(0, T - 1, N).map(fround).reverse();
    case "leading":
      return multiples(N, Math.floor(T / N)).reverse().map((t) => fround(t + stepsOffset));
    case "trailing":
      return npArange(T, 0, -T / N).map((t) => fround(roundHalfEven(t) - 1));
  }
}

/**
 * `DPMSolverMultistepScheduler` timesteps (scheduling_dpmsolver_multistep.py),
 * descending integers from N+1 points with the last dropped: linspace
 * `linspace(0, T-1, N+1).round()[::-1][:-1]`; leading
 * `(arange(N+1) * (T // (N+1))).round()[::-1][:-1] + steps_offset`; trailing
 * `arange(T, 0, -T/N).round() - 1`. (`lambda_min_clipped` = -inf, so the
 * clipped last timestep is T.)
 */
export function dpmTimesteps(
  spacing: TimestepSpacing,
  numTrainTimesteps: number,
  numInferenceSteps: number,
  stepsOffset: number,
): number[] {
  const T = numTrainTimesteps, N = numInferenceSteps;
  switch (spacing) {
    case "linspace":
      return npLinspace(0, T - 1, N + 1).map(roundHalfEven).reverse().slice(0, N);
    case "leading":
      return multiples(N + 1, Math.floor(T / (N + 1))).reverse().slice(0, N).map((t) =>
        t + stepsOffset
      );
    case "trailing":
      return npArange(T, 0, -T / N).map((t) => roundHalfEven(t) - 1);
  }
}
