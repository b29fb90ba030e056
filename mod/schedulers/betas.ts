/**
 * Beta schedules and cumulative alphas as diffusers builds them in float32
 * torch (every scheduler's `__init__` in huggingface/diffusers
 * `src/diffusers/schedulers/`):
 *
 * - `linear`: `torch.linspace(beta_start, beta_end, T, dtype=torch.float32)`
 * - `scaled_linear`: `torch.linspace(beta_start**0.5, beta_end**0.5, T, dtype=torch.float32) ** 2`
 * - `alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)`
 *
 * @module
 */

import type { BetaSchedule } from "./scheduler_config.ts";

const fround = Math.fround;

/**
 * float32 `torch.linspace(start, end, steps)` on the CPU, value for value as
 * the portable (non-AVX) build computes it: pytorch/pytorch
 * `aten/src/ATen/native/cpu/RangeFactoriesKernel.cpp` `linspace_kernel`
 * (`step = (end - start) / (steps - 1)`; index i < steps/2 is
 * `start + step*i`, the rest `end - step*(steps - i - 1)`), driven by
 * `cpu_serial_kernel_vec` (`aten/src/ATen/native/cpu/Loops.h`): blocks of two
 * 8-lane vectors, each `Vectorized<float>::arange(base, step)` =
 * `base + k*step` from the block's first index, then the remainder scalar.
 * AVX2/AVX-512 builds (FMA, 16 lanes) can differ in the last float32 bit.
 */
export function torchLinspaceF32(start: number, end: number, steps: number): Float32Array {
  if (!Number.isInteger(steps) || steps < 1) {
    throw new RangeError(`linspace steps must be a positive integer, got ${steps}`);
  }
  const out = new Float32Array(steps);
  const s = fround(start);
  const e = fround(end);
  if (steps === 1) {
    out[0] = s;
    return out;
  }
  const step = fround(fround(e - s) / (steps - 1));
  const halfway = Math.floor(steps / 2);
  const scalarAt = (i: number): number =>
    i < halfway ? fround(s + fround(step * i)) : fround(e - fround(step * (steps - i - 1)));
  const lanes = 8;
  const vectorEnd = steps - (steps % (2 * lanes));
  let i = 0;
  for (; i < vectorEnd; i += lanes) {
    const base = scalarAt(i);
    for (let k = 0; k < lanes; k++) out[i + k] = fround(base + fround(k * step));
  }
  for (; i < steps; i++) out[i] = scalarAt(i);
  return out;
}

/** The float32 betas of a diffusers config (`trained_betas` are rejected by the config parser). */
export function makeBetas(
  schedule: BetaSchedule,
  betaStart: number,
  betaEnd: number,
  numTrainTimesteps: number,
): Float32Array {
  switch (schedule) {
    case "linear":
      return torchLinspaceF32(betaStart, betaEnd, numTrainTimesteps);
    case "scaled_linear": {
      const roots = torchLinspaceF32(Math.sqrt(betaStart), Math.sqrt(betaEnd), numTrainTimesteps);
      // `** 2` on a float32 tensor is one float32 multiplication.
      return roots.map((r) => fround(r * r));
    }
  }
}

/**
 * `torch.cumprod(1.0 - betas)`: `1 - beta` in float32; the CPU cumprod
 * kernel accumulates in double (`acc_type<float, false>`) and rounds each
 * output (pytorch/pytorch `aten/src/ATen/native/cpu/ReduceOpsKernel.cpp`).
 */
export function alphasCumprod(betas: Float32Array): Float32Array {
  const out = new Float32Array(betas.length);
  let acc = 1;
  for (let i = 0; i < betas.length; i++) {
    acc *= fround(1 - betas[i]);
    out[i] = acc;
  }
  return out;
}

/**
 * Karras-style noise levels `((1 - ᾱ) / ᾱ) ** 0.5`, element-wise in float32
 * as the sigma schedulers compute them from the float32 `alphas_cumprod`.
 */
export function sigmasFromAlphasCumprod(alphasCumprod: Float32Array): Float32Array {
  return alphasCumprod.map((a) => fround(Math.sqrt(fround(fround(1 - a) / a))));
}
