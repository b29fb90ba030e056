/**
 * Test support for the scheduler tests: the published SD 1.5 scheduler
 * config, an independent float64 noise schedule, the torch fixture reader and
 * closeness assertions. Not part of the module's public API.
 *
 * @module
 */

import { ok } from "node:assert";
import { SD15_SCHEDULER_CONFIG } from "../sd15_config.ts";

/**
 * runwayml/stable-diffusion-v1-5 `scheduler/scheduler_config.json` as
 * published on Hugging Face (the same PNDM config as in its mirror
 * stable-diffusion-v1-5/stable-diffusion-v1-5, which models.lock pins): the
 * one a converted set gets, with the published file's diffusers version.
 */
export const SD15_CONFIG = {
  ...SD15_SCHEDULER_CONFIG,
  _diffusers_version: "0.6.0",
} as const;

/**
 * ᾱ in float64 straight from the definition, independent of the float32
 * torch emulation: betas = linspace(√0.00085, √0.012, 1000)², ᾱ_t = Π(1-β).
 */
export function alphasCumprod64(): Float64Array {
  const n = 1000;
  const a = Math.sqrt(0.00085), b = Math.sqrt(0.012);
  const out = new Float64Array(n);
  let acc = 1;
  for (let i = 0; i < n; i++) {
    const root = a + ((b - a) * i) / (n - 1);
    acc *= 1 - root * root;
    out[i] = acc;
  }
  return out;
}

/** σ(t) = sqrt((1-ᾱ)/ᾱ) in float64, linearly interpolated at fractional t. */
export function sigma64(t: number, ac: Float64Array = alphasCumprod64()): number {
  const s = (i: number) => Math.sqrt((1 - ac[i]) / ac[i]);
  const j = Math.floor(t);
  if (j >= ac.length - 1) return s(ac.length - 1);
  return s(j) + (s(j + 1) - s(j)) * (t - j);
}

/** A deterministic, sign-varying test pattern of length n. */
export function pattern(n: number, phase: number): Float32Array {
  return Float32Array.from({ length: n }, (_, i) => Math.sin(0.37 * i + phase) * 1.3 + 0.1 * phase);
}

/** Decodes base64 little-endian float32 (the torch fixtures' storage format). */
export function decodeF32(b64: string): Float32Array {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const view = new DataView(bytes.buffer);
  return Float32Array.from({ length: bytes.length / 4 }, (_, i) => view.getFloat32(i * 4, true));
}

/** The torch betas fixture (see make_torch_betas.py for provenance). */
export function torchBetasFixture(): Record<string, Record<string, string>> {
  return JSON.parse(
    Deno.readTextFileSync(new URL("./torch_betas_fixture.json", import.meta.url)),
  );
}

/** Asserts |actual - expected| <= atol + rtol·|expected| element-wise. */
export function assertClose(
  actual: ArrayLike<number>,
  expected: ArrayLike<number>,
  atol: number,
  what: string,
  rtol = 0,
): void {
  ok(actual.length === expected.length, `${what}: length ${actual.length} vs ${expected.length}`);
  for (let i = 0; i < expected.length; i++) {
    const diff = Math.abs(actual[i] - expected[i]);
    ok(
      Number.isFinite(actual[i]) && diff <= atol + rtol * Math.abs(expected[i]),
      `${what}[${i}]: got ${actual[i]}, expected ${expected[i]} (|diff| ${diff})`,
    );
  }
}

/** The UNet stand-in: the exact epsilon for a known x0 at the current step. */
export type Oracle = (modelInput: Float32Array, t: number, stepIndex: number) => Float32Array;

/**
 * Epsilon that maps a variance-preserving input `√ᾱ x0 + √(1-ᾱ) ε` back to
 * x0, for the alpha-parameterised schedulers (PNDM, DDIM, LCM), with ᾱ from
 * the independent float64 schedule.
 */
export function alphaOracle(x0: Float32Array, ac: Float64Array = alphasCumprod64()): Oracle {
  return (input, t) => {
    const a = ac[t];
    return input.map((v, i) => (v - Math.sqrt(a) * x0[i]) / Math.sqrt(1 - a));
  };
}

/**
 * Epsilon for the sigma-space schedulers given the scheduler's sigma at the
 * step: the UNet input is variance preserving (`x / √(σ²+1)` for Euler after
 * `scaleModelInput`, and DPM-Solver's own latent), i.e.
 * `x0/√(σ²+1) + ε σ/√(σ²+1)`.
 */
export function sigmaOracle(x0: Float32Array, sigmas: number[]): Oracle {
  return (input, _t, index) => {
    const s = sigmas[index];
    const c = Math.sqrt(s * s + 1);
    return input.map((v, i) => (v * c - x0[i]) / s);
  };
}

/** A minimal view of a scheduler for {@link runLoop}. */
interface LoopScheduler {
  readonly timesteps: number[];
  readonly initNoiseSigma: number;
  scaleModelInput(sample: Float32Array, t: number): Float32Array;
  step(
    modelOutput: Float32Array,
    t: number,
    sample: Float32Array,
    generator?: unknown,
  ): { prevSample: Float32Array; predOriginalSample?: Float32Array };
}

/**
 * The SD sampling loop with a stand-in model: latents = noise·initNoiseSigma,
 * then scale → oracle → step for every timestep. Returns the final latent and
 * the last `predOriginalSample`.
 */
export function runLoop(
  scheduler: LoopScheduler,
  noise: Float32Array,
  oracle: Oracle,
  generator?: unknown,
): { final: Float32Array; lastPred?: Float32Array } {
  let x: Float32Array = noise.map((v) => v * scheduler.initNoiseSigma);
  let lastPred: Float32Array | undefined;
  scheduler.timesteps.forEach((t, index) => {
    const input = scheduler.scaleModelInput(x, t);
    const out = scheduler.step(oracle(input, t, index), t, x, generator);
    x = out.prevSample;
    lastPred = out.predOriginalSample;
  });
  return { final: x, lastPred };
}
