/**
 * DDIM: huggingface/diffusers `src/diffusers/schedulers/scheduling_ddim.py`
 * (`DDIMScheduler.set_timesteps`, `step`, `_get_variance`), after formulas
 * (12) and (16) of Song et al., "Denoising Diffusion Implicit Models"
 * (arXiv:2010.02502).
 *
 * @module
 */

import type { TorchGenerator } from "../random/mod.ts";
import { checkSameLength, requireGenerator, requireTimesteps } from "./checks.ts";
import { clipSample, epsilonFromV, predictOriginalVp } from "./convert_model_output.ts";
import type { Scheduler, StepResult } from "./scheduler.ts";
import type { PredictionType, SchedulerConfig, TimestepSpacing } from "./scheduler_config.ts";
import { checkStepCount, ddimTimesteps } from "./spacing.ts";
import {
  addNoiseAlpha,
  alphaAt,
  alphaPrevAt,
  finalAlphaCumprod,
  LINEAR_DEFAULTS,
  trainingSchedule,
} from "./training.ts";

/** Options the factory resolves for {@link DdimScheduler}. */
export interface DdimOptions {
  /** Overrides the config's `timestep_spacing` (class default "leading"). */
  timestepSpacing?: TimestepSpacing;
  /** η of DDIM formula (16): 0 = deterministic DDIM, 1 = DDPM-like. Default 0. */
  eta?: number;
}

/** DDIM; deterministic at η = 0, drawing `randn` noise each step when η > 0. */
export class DdimScheduler implements Scheduler {
  /** See {@link Scheduler.name}; `"ddim"` (diffusers `DDIMScheduler`). */
  readonly name = "ddim" as const;
  /** See {@link Scheduler.initNoiseSigma}; always 1 for this variance-preserving scheduler. */
  readonly initNoiseSigma = 1;
  readonly #alphasCumprod: Float32Array;
  readonly #numTrainTimesteps: number;
  readonly #finalAlphaCumprod: number;
  readonly #stepsOffset: number;
  readonly #spacing: TimestepSpacing;
  readonly #prediction: PredictionType;
  readonly #clipSample: boolean;
  readonly #clipRange: number;
  readonly #eta: number;
  #timesteps: number[] = [];
  #numInferenceSteps = 0;

  /**
   * Builds the training schedule from `config` (`DDIMScheduler.__init__`; class defaults
   * set_alpha_to_one=true, clip_sample=true, timestep_spacing "leading").
   *
   * @throws RangeError when eta is outside 0..1.
   */
  constructor(config: SchedulerConfig, options: DdimOptions = {}) {
    const eta = options.eta ?? 0;
    if (!Number.isFinite(eta) || eta < 0 || eta > 1) {
      throw new RangeError(`ddim eta must be in 0..1, got ${eta}`);
    }
    const schedule = trainingSchedule(config, LINEAR_DEFAULTS);
    this.#alphasCumprod = schedule.alphasCumprod;
    this.#numTrainTimesteps = schedule.numTrainTimesteps;
    // Class defaults differ from PNDM: set_alpha_to_one=True, clip_sample=True.
    this.#finalAlphaCumprod = finalAlphaCumprod(this.#alphasCumprod, config.setAlphaToOne ?? true);
    this.#clipSample = config.clipSample ?? true;
    this.#clipRange = config.clipSampleRange ?? 1;
    this.#stepsOffset = config.stepsOffset ?? 0;
    this.#spacing = options.timestepSpacing ?? config.timestepSpacing ?? "leading";
    this.#prediction = config.predictionType ?? "epsilon";
    this.#eta = eta;
  }

  /** See {@link Scheduler.timesteps}; N integer timesteps, descending. */
  get timesteps(): number[] {
    return this.#timesteps.slice();
  }

  /** See {@link Scheduler.setTimesteps}; spaced per `timestep_spacing` (`DDIMScheduler.set_timesteps`). */
  setTimesteps(numInferenceSteps: number): void {
    checkStepCount(numInferenceSteps, this.#numTrainTimesteps);
    this.#timesteps = ddimTimesteps(
      this.#spacing,
      this.#numTrainTimesteps,
      numInferenceSteps,
      this.#stepsOffset,
    );
    this.#numInferenceSteps = numInferenceSteps;
  }

  /** See {@link Scheduler.scaleModelInput}; identity for DDIM. */
  scaleModelInput(sample: Float32Array, _t: number): Float32Array {
    return sample;
  }

  /**
   * See {@link Scheduler.step}; formula (12) plus the η-scaled noise of formula (16),
   * so `generator` is needed only when η > 0.
   */
  step(
    modelOutput: Float32Array,
    t: number,
    sample: Float32Array,
    generator?: TorchGenerator,
  ): StepResult {
    requireTimesteps("ddim", this.#timesteps);
    checkSameLength("ddim.step", { sample, modelOutput });
    // 1. previous step (= t - T/N), as diffusers does for every spacing.
    const prevT = t - Math.floor(this.#numTrainTimesteps / this.#numInferenceSteps);
    // 2. alphas and betas
    const aT = alphaAt(this.#alphasCumprod, t);
    const aPrev = alphaPrevAt(this.#alphasCumprod, prevT, this.#finalAlphaCumprod);
    const bT = 1 - aT;
    const sa = Math.sqrt(aT), sb = Math.sqrt(bT);
    // 3. predicted x0 and epsilon, formula (12)
    let x0 = predictOriginalVp(this.#prediction, sa, sb, modelOutput, sample);
    const eps = this.#prediction === "epsilon"
      ? modelOutput
      : epsilonFromV(sa, sb, modelOutput, sample);
    // 4. clip x0
    if (this.#clipSample) x0 = clipSample(x0, this.#clipRange);
    // 5. σ_t(η) = η sqrt((1-ᾱ_prev)/(1-ᾱ_t)) sqrt(1-ᾱ_t/ᾱ_prev), formula (16)
    const variance = ((1 - aPrev) / bT) * (1 - aT / aPrev);
    const std = this.#eta * Math.sqrt(variance);
    // 6. direction pointing to x_t, then 7. x_{t-1} without the noise term
    const dirCoeff = Math.sqrt(1 - aPrev - std * std);
    const sPrev = Math.sqrt(aPrev);
    const prevSample = x0.map((v, i) => sPrev * v + dirCoeff * eps[i]);
    if (this.#eta > 0) {
      const noise = requireGenerator("ddim (eta > 0)", generator).randn(sample.length);
      for (let i = 0; i < prevSample.length; i++) prevSample[i] += std * noise[i];
    }
    return { prevSample, predOriginalSample: x0 };
  }

  /** See {@link Scheduler.addNoise}; `sqrt(ᾱ_t) x0 + sqrt(1-ᾱ_t) noise`. */
  addNoise(original: Float32Array, noise: Float32Array, t: number): Float32Array {
    checkSameLength("ddim.addNoise", { original, noise });
    return addNoiseAlpha(this.#alphasCumprod, original, noise, t);
  }
}
