/**
 * Euler (Karras et al. 2022, Algorithm 2 with s_churn = 0):
 * huggingface/diffusers `src/diffusers/schedulers/scheduling_euler_discrete.py`
 * (`EulerDiscreteScheduler.set_timesteps`, `scale_model_input`, `step`,
 * `add_noise`, `init_noise_sigma`), with optional Karras sigmas.
 *
 * @module
 */

import type { TorchGenerator } from "../random/mod.ts";
import { sigmasFromAlphasCumprod } from "./betas.ts";
import { checkSameLength, requireStepLeft, requireTimesteps } from "./checks.ts";
import { predictOriginalSigma } from "./convert_model_output.ts";
import { interpAtIndex } from "./numeric.ts";
import type { Scheduler, StepResult } from "./scheduler.ts";
import type {
  FinalSigmasType,
  PredictionType,
  SchedulerConfig,
  TimestepSpacing,
} from "./scheduler_config.ts";
import {
  eulerInitNoiseSigma,
  indexForTimestep,
  karrasSigmas,
  scaleBySigma,
  sigmaToT,
} from "./sigma_schedule.ts";
import { checkStepCount, eulerTimesteps } from "./spacing.ts";
import { LINEAR_DEFAULTS, trainingSchedule } from "./training.ts";

const fround = Math.fround;

/** Options the factory resolves for {@link EulerScheduler}. */
export interface EulerOptions {
  /** Overrides the config's `timestep_spacing` (class default "linspace"). */
  timestepSpacing?: TimestepSpacing;
  /** Overrides the config's `use_karras_sigmas` (default false). */
  karras?: boolean;
}

/** Deterministic Euler sampler in sigma space (latents scaled by `initNoiseSigma`). */
export class EulerScheduler implements Scheduler {
  /** See {@link Scheduler.name}; `"euler"` (diffusers `EulerDiscreteScheduler`). */
  readonly name = "euler" as const;
  readonly #alphasCumprod: Float32Array;
  readonly #numTrainTimesteps: number;
  readonly #trainSigmas: Float32Array;
  readonly #logSigmas: Float32Array;
  readonly #stepsOffset: number;
  readonly #spacing: TimestepSpacing;
  readonly #prediction: PredictionType;
  readonly #karras: boolean;
  readonly #finalSigmas: FinalSigmasType;
  #timesteps: number[] = [];
  #sigmas: number[] = [];
  #stepIndex: number | null = null;

  /**
   * Builds the training sigmas from `config` (`EulerDiscreteScheduler.__init__`;
   * class default timestep_spacing "linspace").
   */
  constructor(config: SchedulerConfig, options: EulerOptions = {}) {
    const schedule = trainingSchedule(config, LINEAR_DEFAULTS);
    this.#alphasCumprod = schedule.alphasCumprod;
    this.#numTrainTimesteps = schedule.numTrainTimesteps;
    this.#trainSigmas = sigmasFromAlphasCumprod(this.#alphasCumprod);
    // np.log of the float32 sigma array stays float32.
    this.#logSigmas = this.#trainSigmas.map((s) => Math.log(s));
    this.#stepsOffset = config.stepsOffset ?? 0;
    this.#spacing = options.timestepSpacing ?? config.timestepSpacing ?? "linspace";
    this.#prediction = config.predictionType ?? "epsilon";
    this.#karras = options.karras ?? config.useKarrasSigmas ?? false;
    this.#finalSigmas = config.finalSigmasType ?? "zero";
  }

  /**
   * See {@link Scheduler.timesteps}; float32 timesteps, descending, fractional for
   * linspace spacing or Karras sigmas.
   */
  get timesteps(): number[] {
    return this.#timesteps.slice();
  }

  /** The float32 sigma of each step after {@link setTimesteps}, plus the final one (0). */
  get sigmas(): number[] {
    return this.#sigmas.slice();
  }

  /**
   * See {@link Scheduler.initNoiseSigma}; the largest sigma for linspace/trailing spacing, else
   * `sqrt(max² + 1)` (diffusers `init_noise_sigma`); 1 before `setTimesteps`.
   */
  get initNoiseSigma(): number {
    return eulerInitNoiseSigma(this.#sigmas, this.#spacing);
  }

  /** See {@link Scheduler.setTimesteps}; also computes {@link sigmas} and resets the step index. */
  setTimesteps(numInferenceSteps: number): void {
    checkStepCount(numInferenceSteps, this.#numTrainTimesteps);
    let timesteps = eulerTimesteps(
      this.#spacing,
      this.#numTrainTimesteps,
      numInferenceSteps,
      this.#stepsOffset,
    );
    let sigmas = timesteps.map((t) => interpAtIndex(t, this.#trainSigmas));
    if (this.#karras) {
      sigmas = karrasSigmas(sigmas[sigmas.length - 1], sigmas[0], numInferenceSteps);
      timesteps = sigmas.map((s) => fround(sigmaToT(s, this.#logSigmas)));
    }
    const last = this.#finalSigmas === "zero"
      ? 0
      : fround(Math.sqrt(fround(fround(1 - this.#alphasCumprod[0]) / this.#alphasCumprod[0])));
    this.#sigmas = [...sigmas.map(fround), last];
    this.#timesteps = timesteps;
    this.#stepIndex = null;
  }

  /** The step index, found from `t` on first use (`_init_step_index`). */
  #index(t: number): number {
    requireTimesteps("euler", this.#timesteps);
    if (this.#stepIndex === null) this.#stepIndex = indexForTimestep(this.#timesteps, t, "error");
    return this.#stepIndex;
  }

  /** See {@link Scheduler.scaleModelInput}; `sample / sqrt(σ² + 1)`. */
  scaleModelInput(sample: Float32Array, t: number): Float32Array {
    return scaleBySigma(sample, this.#sigmas[this.#index(t)]);
  }

  /**
   * See {@link Scheduler.step}; `x + (σ_next − σ) · (x − x0) / σ` with s_churn = 0, so
   * no noise is drawn and `generator` is ignored.
   */
  step(
    modelOutput: Float32Array,
    t: number,
    sample: Float32Array,
    _generator?: TorchGenerator,
  ): StepResult {
    checkSameLength("euler.step", { sample, modelOutput });
    const index = this.#index(t);
    requireStepLeft("euler", index, this.#timesteps.length);
    // s_churn = 0, so γ = 0 and σ_hat = σ. (Some diffusers versions draw a
    // noise tensor here even then; it is never used, so no draw is made.)
    const sigma = this.#sigmas[index];
    const x0 = predictOriginalSigma(this.#prediction, sigma, modelOutput, sample);
    // derivative d = (x - x0) / σ; x_next = x + d (σ_next - σ)
    const dt = this.#sigmas[index + 1] - sigma;
    const prevSample = sample.map((x, i) => x + ((x - x0[i]) / sigma) * dt);
    this.#stepIndex = index + 1;
    return { prevSample, predOriginalSample: x0 };
  }

  /**
   * See {@link Scheduler.addNoise}; `original + noise * σ(t)`, σ looked up by timestep
   * (`index_for_timestep`: the second occurrence of a repeated timestep).
   */
  addNoise(original: Float32Array, noise: Float32Array, t: number): Float32Array {
    requireTimesteps("euler", this.#timesteps);
    checkSameLength("euler.addNoise", { original, noise });
    const sigma = this.#sigmas[indexForTimestep(this.#timesteps, t, "error")];
    // float32 as torch: `original_samples + noise * sigma`.
    return original.map((x, i) => x + fround(noise[i] * sigma));
  }
}
