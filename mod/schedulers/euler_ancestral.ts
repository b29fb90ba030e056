/**
 * Euler ancestral ("Euler a"): huggingface/diffusers
 * `src/diffusers/schedulers/scheduling_euler_ancestral_discrete.py`
 * (`EulerAncestralDiscreteScheduler.set_timesteps`, `scale_model_input`,
 * `step`, `add_noise`, `init_noise_sigma`), after k-diffusion's
 * `sample_euler_ancestral` (crowsonkb/k-diffusion `sampling.py`).
 *
 * @module
 */

import type { TorchGenerator } from "../random/mod.ts";
import { sigmasFromAlphasCumprod } from "./betas.ts";
import { checkSameLength, requireGenerator, requireStepLeft, requireTimesteps } from "./checks.ts";
import { predictOriginalSigma } from "./convert_model_output.ts";
import { interpAtIndex } from "./numeric.ts";
import type { Scheduler, StepResult } from "./scheduler.ts";
import type { PredictionType, SchedulerConfig, TimestepSpacing } from "./scheduler_config.ts";
import { eulerInitNoiseSigma, indexForTimestep, scaleBySigma } from "./sigma_schedule.ts";
import { checkStepCount, eulerTimesteps } from "./spacing.ts";
import { LINEAR_DEFAULTS, trainingSchedule } from "./training.ts";

const fround = Math.fround;

/** Options the factory resolves for {@link EulerAncestralScheduler}. */
export interface EulerAncestralOptions {
  /** Overrides the config's `timestep_spacing` (class default "linspace"). */
  timestepSpacing?: TimestepSpacing;
}

/**
 * Euler step to σ_down followed by fresh noise of size σ_up, with
 * σ_up = sqrt(σ_to² (σ_from² − σ_to²) / σ_from²) and σ_down = sqrt(σ_to² − σ_up²).
 * Every step draws `generator.randn(sample.length)`, the last one included.
 */
export class EulerAncestralScheduler implements Scheduler {
  /** See {@link Scheduler.name}; `"euler_a"` (diffusers `EulerAncestralDiscreteScheduler`). */
  readonly name = "euler_a" as const;
  readonly #numTrainTimesteps: number;
  readonly #trainSigmas: Float32Array;
  readonly #stepsOffset: number;
  readonly #spacing: TimestepSpacing;
  readonly #prediction: PredictionType;
  #timesteps: number[] = [];
  #sigmas: number[] = [];
  #stepIndex: number | null = null;

  /**
   * Builds the training sigmas from `config` (`EulerAncestralDiscreteScheduler.__init__`;
   * class default timestep_spacing "linspace").
   */
  constructor(config: SchedulerConfig, options: EulerAncestralOptions = {}) {
    const schedule = trainingSchedule(config, LINEAR_DEFAULTS);
    this.#numTrainTimesteps = schedule.numTrainTimesteps;
    this.#trainSigmas = sigmasFromAlphasCumprod(schedule.alphasCumprod);
    this.#stepsOffset = config.stepsOffset ?? 0;
    this.#spacing = options.timestepSpacing ?? config.timestepSpacing ?? "linspace";
    this.#prediction = config.predictionType ?? "epsilon";
  }

  /** See {@link Scheduler.timesteps}; float32 timesteps, descending, fractional for linspace spacing. */
  get timesteps(): number[] {
    return this.#timesteps.slice();
  }

  /** The float32 sigma of each step after {@link setTimesteps}, plus the final 0. */
  get sigmas(): number[] {
    return this.#sigmas.slice();
  }

  /**
   * See {@link Scheduler.initNoiseSigma}; the largest sigma for linspace/trailing spacing, else
   * `sqrt(max² + 1)`; 1 before `setTimesteps`.
   */
  get initNoiseSigma(): number {
    return eulerInitNoiseSigma(this.#sigmas, this.#spacing);
  }

  /** See {@link Scheduler.setTimesteps}; also computes {@link sigmas} and resets the step index. */
  setTimesteps(numInferenceSteps: number): void {
    checkStepCount(numInferenceSteps, this.#numTrainTimesteps);
    const timesteps = eulerTimesteps(
      this.#spacing,
      this.#numTrainTimesteps,
      numInferenceSteps,
      this.#stepsOffset,
    );
    // np.concatenate([np.interp(timesteps, arange, sigmas), [0.0]]).astype(np.float32)
    this.#sigmas = [...timesteps.map((t) => fround(interpAtIndex(t, this.#trainSigmas))), 0];
    this.#timesteps = timesteps;
    this.#stepIndex = null;
  }

  #index(t: number): number {
    requireTimesteps("euler_a", this.#timesteps);
    if (this.#stepIndex === null) this.#stepIndex = indexForTimestep(this.#timesteps, t, "error");
    return this.#stepIndex;
  }

  /** See {@link Scheduler.scaleModelInput}; `sample / sqrt(σ² + 1)`. */
  scaleModelInput(sample: Float32Array, t: number): Float32Array {
    return scaleBySigma(sample, this.#sigmas[this.#index(t)]);
  }

  /**
   * See {@link Scheduler.step}; an Euler step to σ_down plus `generator.randn` noise
   * scaled by σ_up, so `generator` is required.
   */
  step(
    modelOutput: Float32Array,
    t: number,
    sample: Float32Array,
    generator?: TorchGenerator,
  ): StepResult {
    checkSameLength("euler_a.step", { sample, modelOutput });
    const gen = requireGenerator("euler_a", generator);
    const index = this.#index(t);
    requireStepLeft("euler_a", index, this.#timesteps.length);
    const sigmaFrom = this.#sigmas[index];
    const sigmaTo = this.#sigmas[index + 1];
    const x0 = predictOriginalSigma(this.#prediction, sigmaFrom, modelOutput, sample);
    const from2 = sigmaFrom * sigmaFrom, to2 = sigmaTo * sigmaTo;
    const sigmaUp = Math.sqrt((to2 * (from2 - to2)) / from2);
    const sigmaDown = Math.sqrt(to2 - sigmaUp * sigmaUp);
    const dt = sigmaDown - sigmaFrom;
    const prevSample = sample.map((x, i) => x + ((x - x0[i]) / sigmaFrom) * dt);
    const noise = gen.randn(sample.length);
    for (let i = 0; i < prevSample.length; i++) prevSample[i] += noise[i] * sigmaUp;
    this.#stepIndex = index + 1;
    return { prevSample, predOriginalSample: x0 };
  }

  /**
   * See {@link Scheduler.addNoise}; `original + noise * σ(t)`, σ looked up by timestep
   * (`index_for_timestep`: the second occurrence of a repeated timestep).
   */
  addNoise(original: Float32Array, noise: Float32Array, t: number): Float32Array {
    requireTimesteps("euler_a", this.#timesteps);
    checkSameLength("euler_a.addNoise", { original, noise });
    const sigma = this.#sigmas[indexForTimestep(this.#timesteps, t, "error")];
    // float32 as torch: `original_samples + noise * sigma`.
    return original.map((x, i) => x + fround(noise[i] * sigma));
  }
}
