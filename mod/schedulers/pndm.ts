/**
 * PNDM in its PLMS form (`skip_prk_steps=True`, the Stable Diffusion 1.5
 * default): huggingface/diffusers `src/diffusers/schedulers/scheduling_pndm.py`
 * (`PNDMScheduler.set_timesteps`, `step_plms`, `_get_prev_sample`), after
 * crowsonkb's PLMS sampler (CompVis/latent-diffusion PR 51) and formula (9)
 * of the PNDM paper (arXiv:2202.09778).
 *
 * @module
 */

import type { TorchGenerator } from "../random/mod.ts";
import { checkSameLength, requireTimesteps } from "./checks.ts";
import { epsilonFromV } from "./convert_model_output.ts";
import type { Scheduler, StepResult } from "./scheduler.ts";
import type { PredictionType, SchedulerConfig, TimestepSpacing } from "./scheduler_config.ts";
import { checkStepCount, pndmBaseTimesteps } from "./spacing.ts";
import {
  addNoiseAlpha,
  alphaAt,
  alphaPrevAt,
  finalAlphaCumprod,
  LINEAR_DEFAULTS,
  trainingSchedule,
} from "./training.ts";

/** Options the factory resolves for {@link PndmScheduler}. */
export interface PndmOptions {
  /** Overrides the config's `timestep_spacing` (class default "leading"). */
  timestepSpacing?: TimestepSpacing;
}

/**
 * PLMS: a fourth-order linear multistep method over the DDIM transition. The
 * first interval is taken twice (Euler, then redone with the mean of both
 * epsilons), so N steps make N+1 UNet calls.
 */
export class PndmScheduler implements Scheduler {
  /** See {@link Scheduler.name}; `"pndm"` (diffusers `PNDMScheduler`, PLMS only). */
  readonly name = "pndm" as const;
  /** See {@link Scheduler.initNoiseSigma}; always 1 for this variance-preserving scheduler. */
  readonly initNoiseSigma = 1;
  readonly #alphasCumprod: Float32Array;
  readonly #numTrainTimesteps: number;
  readonly #finalAlphaCumprod: number;
  readonly #stepsOffset: number;
  readonly #spacing: TimestepSpacing;
  readonly #prediction: PredictionType;
  #timesteps: number[] = [];
  #numInferenceSteps = 0;
  #ets: Float32Array[] = [];
  #counter = 0;
  #curSample: Float32Array | null = null;

  /**
   * Builds the training schedule from `config` (`PNDMScheduler.__init__`; class default
   * timestep_spacing "leading").
   *
   * @throws Error when the config asks for PRK warm-up steps
   *   (`skip_prk_steps: false`), which are not implemented.
   */
  constructor(config: SchedulerConfig, options: PndmOptions = {}) {
    if (config.skipPrkSteps === false) {
      throw new Error(
        "pndm: scheduler config skip_prk_steps=false (Runge-Kutta warm-up) is not implemented; " +
          "only PLMS (skip_prk_steps=true) is",
      );
    }
    const schedule = trainingSchedule(config, LINEAR_DEFAULTS);
    this.#alphasCumprod = schedule.alphasCumprod;
    this.#numTrainTimesteps = schedule.numTrainTimesteps;
    this.#finalAlphaCumprod = finalAlphaCumprod(this.#alphasCumprod, config.setAlphaToOne ?? false);
    this.#stepsOffset = config.stepsOffset ?? 0;
    this.#spacing = options.timestepSpacing ?? config.timestepSpacing ?? "leading";
    this.#prediction = config.predictionType ?? "epsilon";
  }

  /** See {@link Scheduler.timesteps}; N+1 integer timesteps, the second repeated. */
  get timesteps(): number[] {
    return this.#timesteps.slice();
  }

  /** See {@link Scheduler.setTimesteps}; also clears the epsilon history (`ets`) and counter. */
  setTimesteps(numInferenceSteps: number): void {
    checkStepCount(numInferenceSteps, this.#numTrainTimesteps);
    const base = pndmBaseTimesteps(
      this.#spacing,
      this.#numTrainTimesteps,
      numInferenceSteps,
      this.#stepsOffset,
    );
    // plms_timesteps = concat(_t[:-1], _t[-2:-1], _t[-1:])[::-1]
    this.#timesteps = [...base.slice(0, -1), ...base.slice(-2, -1), ...base.slice(-1)].reverse();
    this.#numInferenceSteps = numInferenceSteps;
    this.#ets = [];
    this.#counter = 0;
    this.#curSample = null;
  }

  /** See {@link Scheduler.scaleModelInput}; identity for PNDM. */
  scaleModelInput(sample: Float32Array, _t: number): Float32Array {
    return sample;
  }

  /** See {@link Scheduler.step}; diffusers `step_plms`, linear multistep over the epsilon history. */
  step(
    modelOutput: Float32Array,
    t: number,
    sample: Float32Array,
    _generator?: TorchGenerator,
  ): StepResult {
    requireTimesteps("pndm", this.#timesteps);
    checkSameLength("pndm.step", { sample, modelOutput });
    const stride = Math.floor(this.#numTrainTimesteps / this.#numInferenceSteps);
    let timestep = t;
    let prevTimestep = t - stride;
    if (this.#counter !== 1) {
      this.#ets.push(modelOutput.slice());
      // diffusers keeps the whole list but only ever reads the last four.
      if (this.#ets.length > 4) this.#ets.shift();
    } else {
      prevTimestep = t;
      timestep = t + stride;
    }

    const e = this.#ets;
    const n = e.length;
    let eps: Float32Array;
    let x = sample;
    if (n === 1 && this.#counter === 0) {
      eps = modelOutput;
      this.#curSample = sample.slice();
    } else if (n === 1 && this.#counter === 1) {
      const e1 = e[0];
      eps = modelOutput.map((m, i) => (m + e1[i]) / 2);
      x = this.#curSample ?? sample;
      this.#curSample = null;
    } else if (n === 2) {
      const [e2, e1] = e;
      eps = e1.map((v, i) => (3 * v - e2[i]) / 2);
    } else if (n === 3) {
      const [e3, e2, e1] = e;
      eps = e1.map((v, i) => (23 * v - 16 * e2[i] + 5 * e3[i]) / 12);
    } else {
      const [e4, e3, e2, e1] = e;
      eps = e1.map((v, i) => (55 * v - 59 * e2[i] + 37 * e3[i] - 9 * e4[i]) / 24);
    }

    const prevSample = this.#prevSample(x, timestep, prevTimestep, eps);
    this.#counter++;
    return { prevSample };
  }

  /** `_get_prev_sample`: PNDM formula (9), the DDIM transition x_t → x_{t-δ}. */
  #prevSample(
    sample: Float32Array,
    timestep: number,
    prevTimestep: number,
    modelOutput: Float32Array,
  ): Float32Array {
    const aT = alphaAt(this.#alphasCumprod, timestep);
    const aPrev = alphaPrevAt(this.#alphasCumprod, prevTimestep, this.#finalAlphaCumprod);
    const bT = 1 - aT;
    const bPrev = 1 - aPrev;
    const eps = this.#prediction === "v_prediction"
      ? epsilonFromV(Math.sqrt(aT), Math.sqrt(bT), modelOutput, sample)
      : modelOutput;
    const sampleCoeff = Math.sqrt(aPrev / aT);
    const denom = aT * Math.sqrt(bPrev) + Math.sqrt(aT * bT * aPrev);
    const epsCoeff = (aPrev - aT) / denom;
    return sample.map((x, i) => sampleCoeff * x - epsCoeff * eps[i]);
  }

  /** See {@link Scheduler.addNoise}; `sqrt(ᾱ_t) x0 + sqrt(1-ᾱ_t) noise`. */
  addNoise(original: Float32Array, noise: Float32Array, t: number): Float32Array {
    checkSameLength("pndm.addNoise", { original, noise });
    return addNoiseAlpha(this.#alphasCumprod, original, noise, t);
  }
}
