/**
 * DPM-Solver++(2M): huggingface/diffusers
 * `src/diffusers/schedulers/scheduling_dpmsolver_multistep.py`
 * (`DPMSolverMultistepScheduler` with `algorithm_type="dpmsolver++"`,
 * `solver_order=2`, `solver_type="midpoint"`: `set_timesteps`,
 * `convert_model_output`, `dpm_solver_first_order_update`,
 * `multistep_dpm_solver_second_order_update`, `step`, `add_noise`), after Lu
 * et al., "DPM-Solver++" (arXiv:2211.01095). "DPM++ 2M Karras" is the same
 * with `use_karras_sigmas=True`.
 *
 * @module
 */

import type { TorchGenerator } from "../random/mod.ts";
import { sigmasFromAlphasCumprod } from "./betas.ts";
import { checkSameLength, requireStepLeft, requireTimesteps } from "./checks.ts";
import { predictOriginalVp } from "./convert_model_output.ts";
import { interpAtIndex, roundHalfEven } from "./numeric.ts";
import type { Scheduler, StepResult } from "./scheduler.ts";
import type {
  FinalSigmasType,
  PredictionType,
  SchedulerConfig,
  TimestepSpacing,
} from "./scheduler_config.ts";
import { indexForTimestep, karrasSigmas, sigmaToT } from "./sigma_schedule.ts";
import { checkStepCount, dpmTimesteps } from "./spacing.ts";
import { LINEAR_DEFAULTS, trainingSchedule } from "./training.ts";

const fround = Math.fround;

/** Options the factory resolves for {@link DpmSolverMultistepScheduler}. */
export interface DpmSolverOptions {
  /** Overrides the config's `timestep_spacing` (class default "linspace"). */
  timestepSpacing?: TimestepSpacing;
  /** Overrides the config's `use_karras_sigmas` (default false). */
  karras?: boolean;
}

/** `_sigma_to_alpha_sigma_t`: the VP pair (α_t, σ_t) of a sigma-space noise level. */
function alphaSigma(sigma: number): { alpha: number; sigma: number } {
  const alpha = 1 / Math.sqrt(sigma * sigma + 1);
  return { alpha, sigma: sigma * alpha };
}

/** λ = log α − log σ (half log-SNR); +∞ at σ = 0. */
function lambdaOf(p: { alpha: number; sigma: number }): number {
  return Math.log(p.alpha) - Math.log(p.sigma);
}

/**
 * Second-order multistep DPM-Solver++ on data predictions. Deterministic; its
 * history of x0 predictions is reset by {@link setTimesteps}.
 */
export class DpmSolverMultistepScheduler implements Scheduler {
  /** See {@link Scheduler.name}; `"dpmpp_2m"` (diffusers `DPMSolverMultistepScheduler`). */
  readonly name = "dpmpp_2m" as const;
  /** See {@link Scheduler.initNoiseSigma}; always 1, as the sampler works on VP latents. */
  readonly initNoiseSigma = 1;
  readonly #alphasCumprod: Float32Array;
  readonly #numTrainTimesteps: number;
  readonly #trainSigmas: Float32Array;
  readonly #logSigmas: Float32Array;
  readonly #stepsOffset: number;
  readonly #spacing: TimestepSpacing;
  readonly #prediction: PredictionType;
  readonly #karras: boolean;
  readonly #lowerOrderFinal: boolean;
  readonly #eulerAtFinal: boolean;
  readonly #finalSigmas: FinalSigmasType;
  #timesteps: number[] = [];
  #sigmas: number[] = [];
  #stepIndex: number | null = null;
  /** The previous x0 prediction (model_outputs[-2]). */
  #previousX0: Float32Array | null = null;
  #lowerOrderNums = 0;

  /**
   * Builds the training sigmas from `config` (`DPMSolverMultistepScheduler.__init__`;
   * class default timestep_spacing "linspace", lower_order_final=true).
   *
   * @throws Error when the config selects a DPM-Solver variant other than
   *   dpmsolver++ / order 2 / midpoint.
   */
  constructor(config: SchedulerConfig, options: DpmSolverOptions = {}) {
    const variant: Array<[string, unknown, unknown]> = [
      ["algorithm_type", config.algorithmType, "dpmsolver++"],
      ["solver_order", config.solverOrder, 2],
      ["solver_type", config.solverType, "midpoint"],
    ];
    for (const [key, value, wanted] of variant) {
      if (value !== undefined && value !== wanted) {
        throw new Error(
          `dpmpp_2m implements ${key}=${JSON.stringify(wanted)}, but the scheduler config sets ${
            JSON.stringify(value)
          }`,
        );
      }
    }
    const schedule = trainingSchedule(config, LINEAR_DEFAULTS);
    this.#alphasCumprod = schedule.alphasCumprod;
    this.#numTrainTimesteps = schedule.numTrainTimesteps;
    this.#trainSigmas = sigmasFromAlphasCumprod(this.#alphasCumprod);
    this.#logSigmas = this.#trainSigmas.map((s) => Math.log(s));
    this.#stepsOffset = config.stepsOffset ?? 0;
    this.#spacing = options.timestepSpacing ?? config.timestepSpacing ?? "linspace";
    this.#prediction = config.predictionType ?? "epsilon";
    this.#karras = options.karras ?? config.useKarrasSigmas ?? false;
    this.#lowerOrderFinal = config.lowerOrderFinal ?? true;
    this.#eulerAtFinal = config.eulerAtFinal ?? false;
    this.#finalSigmas = config.finalSigmasType ?? "zero";
  }

  /**
   * See {@link Scheduler.timesteps}; integer timesteps (mapped back from the
   * Karras sigmas when `karras` is set), descending.
   */
  get timesteps(): number[] {
    return this.#timesteps.slice();
  }

  /** The float32 sigma of each step after {@link setTimesteps}, plus the final one. */
  get sigmas(): number[] {
    return this.#sigmas.slice();
  }

  /**
   * See {@link Scheduler.setTimesteps}; also computes {@link sigmas} and clears the
   * x0 history and lower-order counter.
   */
  setTimesteps(numInferenceSteps: number): void {
    checkStepCount(numInferenceSteps, this.#numTrainTimesteps);
    let timesteps: number[];
    let sigmas: number[];
    let last: number;
    if (this.#karras) {
      // in_sigmas = flip(sigmas): sigma_min is the t=0 sigma, sigma_max the t=T-1 one.
      const train = this.#trainSigmas;
      sigmas = karrasSigmas(train[0], train[train.length - 1], numInferenceSteps);
      timesteps = sigmas.map((s) => roundHalfEven(sigmaToT(s, this.#logSigmas)));
      last = this.#finalSigmas === "zero" ? 0 : sigmas[sigmas.length - 1];
    } else {
      timesteps = dpmTimesteps(
        this.#spacing,
        this.#numTrainTimesteps,
        numInferenceSteps,
        this.#stepsOffset,
      );
      sigmas = timesteps.map((t) => interpAtIndex(t, this.#trainSigmas));
      const a0 = this.#alphasCumprod[0];
      last = this.#finalSigmas === "zero" ? 0 : Math.sqrt((1 - a0) / a0);
    }
    this.#sigmas = [...sigmas, last].map(fround);
    this.#timesteps = timesteps;
    this.#stepIndex = null;
    this.#previousX0 = null;
    this.#lowerOrderNums = 0;
  }

  /** See {@link Scheduler.scaleModelInput}; identity for DPM-Solver. */
  scaleModelInput(sample: Float32Array, _t: number): Float32Array {
    return sample;
  }

  /**
   * See {@link Scheduler.step}; first-order update on the first step and on a last
   * step that lands on σ = 0 (or with lower_order_final when N < 15, or
   * euler_at_final); the second-order midpoint update otherwise.
   */
  step(
    modelOutput: Float32Array,
    t: number,
    sample: Float32Array,
    _generator?: TorchGenerator,
  ): StepResult {
    requireTimesteps("dpmpp_2m", this.#timesteps);
    checkSameLength("dpmpp_2m.step", { sample, modelOutput });
    if (this.#stepIndex === null) {
      this.#stepIndex = indexForTimestep(this.#timesteps, t, "last");
    }
    const index = this.#stepIndex;
    const n = this.#timesteps.length;
    requireStepLeft("dpmpp_2m", index, n);
    // First order on the last step when it lands on sigma 0 (or as configured).
    const lowerOrderFinal = index === n - 1 &&
      (this.#eulerAtFinal || (this.#lowerOrderFinal && n < 15) || this.#finalSigmas === "zero");

    // convert_model_output: data prediction x0.
    const current = alphaSigma(this.#sigmas[index]);
    const x0 = predictOriginalVp(
      this.#prediction,
      current.alpha,
      current.sigma,
      modelOutput,
      sample,
    );

    const target = alphaSigma(this.#sigmas[index + 1]);
    const h = lambdaOf(target) - lambdaOf(current);
    const ratio = target.sigma / current.sigma;
    const coeff = target.alpha * (Math.exp(-h) - 1);
    let prevSample: Float32Array;
    const previous = this.#previousX0;
    if (this.#lowerOrderNums < 1 || lowerOrderFinal || previous === null) {
      // dpm_solver_first_order_update: x_t = (σ_t/σ_s) x − α_t (e^{−h} − 1) x0
      prevSample = sample.map((x, i) => ratio * x - coeff * x0[i]);
    } else {
      // multistep_dpm_solver_second_order_update, midpoint:
      // D0 = m0, D1 = (m0 − m1) / r0 with r0 = h0 / h
      const before = alphaSigma(this.#sigmas[index - 1]);
      const h0 = lambdaOf(current) - lambdaOf(before);
      const r0 = h0 / h;
      prevSample = sample.map((x, i) => {
        const d1 = (x0[i] - previous[i]) / r0;
        return ratio * x - coeff * x0[i] - 0.5 * coeff * d1;
      });
    }
    this.#previousX0 = x0;
    if (this.#lowerOrderNums < 2) this.#lowerOrderNums++;
    this.#stepIndex = index + 1;
    return { prevSample, predOriginalSample: x0 };
  }

  /** See {@link Scheduler.addNoise}; `α_t x0 + σ_t noise` at the step whose timestep is `t`. */
  addNoise(original: Float32Array, noise: Float32Array, t: number): Float32Array {
    requireTimesteps("dpmpp_2m", this.#timesteps);
    checkSameLength("dpmpp_2m.addNoise", { original, noise });
    // `_sigma_to_alpha_sigma_t` and the sum on float32 tensors, as torch computes them.
    const sigma = this.#sigmas[indexForTimestep(this.#timesteps, t, "last")];
    const alpha = fround(1 / fround(Math.sqrt(fround(fround(sigma * sigma) + 1))));
    const sigmaT = fround(sigma * alpha);
    return original.map((x, i) => fround(alpha * x) + fround(sigmaT * noise[i]));
  }
}
