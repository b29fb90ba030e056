/**
 * Latent Consistency Model multistep sampling: huggingface/diffusers
 * `src/diffusers/schedulers/scheduling_lcm.py` (`LCMScheduler.set_timesteps`,
 * `get_scalings_for_boundary_condition_discrete`, `step`, `add_noise`),
 * after Luo et al., "Latent Consistency Models" (arXiv:2310.04378).
 *
 * @module
 */

import type { TorchGenerator } from "../random/mod.ts";
import { checkSameLength, requireGenerator, requireStepLeft, requireTimesteps } from "./checks.ts";
import { clipSample, predictOriginalVp } from "./convert_model_output.ts";
import type { Scheduler, StepResult } from "./scheduler.ts";
import type { PredictionType, SchedulerConfig } from "./scheduler_config.ts";
import { indexForTimestep } from "./sigma_schedule.ts";
import {
  addNoiseAlpha,
  alphaAt,
  alphaPrevAt,
  finalAlphaCumprod,
  trainingSchedule,
} from "./training.ts";

/** LCM's σ_data in the consistency boundary condition. */
const SIGMA_DATA = 0.5;

/**
 * LCM: each step predicts the clean latent (`denoised`, returned as
 * `predOriginalSample`, which the LCM pipeline decodes) and, except on the
 * last step, re-noises it to the next timestep with `generator.randn`.
 * `timestep_spacing` and `steps_offset` do not apply: LCM picks its
 * timesteps from the `original_inference_steps` grid, as diffusers does.
 */
export class LcmScheduler implements Scheduler {
  /** See {@link Scheduler.name}; `"lcm"` (diffusers `LCMScheduler`). */
  readonly name = "lcm" as const;
  /** See {@link Scheduler.initNoiseSigma}; always 1 for this variance-preserving scheduler. */
  readonly initNoiseSigma = 1;
  readonly #alphasCumprod: Float32Array;
  readonly #numTrainTimesteps: number;
  readonly #finalAlphaCumprod: number;
  readonly #prediction: PredictionType;
  readonly #clipSample: boolean;
  readonly #clipRange: number;
  readonly #originalSteps: number;
  readonly #timestepScaling: number;
  #timesteps: number[] = [];
  #stepIndex: number | null = null;

  /**
   * Builds the training schedule from `config` (`LCMScheduler.__init__`; class defaults
   * scaled_linear 0.00085..0.012, set_alpha_to_one=true, original_inference_steps 50).
   */
  constructor(config: SchedulerConfig) {
    // LCMScheduler's own defaults: scaled_linear 0.00085..0.012, set_alpha_to_one=True.
    const schedule = trainingSchedule(config, {
      numTrainTimesteps: 1000,
      betaStart: 0.00085,
      betaEnd: 0.012,
      betaSchedule: "scaled_linear",
    });
    this.#alphasCumprod = schedule.alphasCumprod;
    this.#numTrainTimesteps = schedule.numTrainTimesteps;
    this.#finalAlphaCumprod = finalAlphaCumprod(this.#alphasCumprod, config.setAlphaToOne ?? true);
    this.#prediction = config.predictionType ?? "epsilon";
    this.#clipSample = config.clipSample ?? false;
    this.#clipRange = config.clipSampleRange ?? 1;
    this.#originalSteps = config.originalInferenceSteps ?? 50;
    this.#timestepScaling = config.timestepScaling ?? 10;
  }

  /** See {@link Scheduler.timesteps}; N integer timesteps from the LCM grid, descending. */
  get timesteps(): number[] {
    return this.#timesteps.slice();
  }

  /**
   * See {@link Scheduler.setTimesteps}; the LCM grid `arange(1, int(orig · strength) + 1) ·
   * (T // orig) − 1`, reversed, sampled at `floor(linspace(0, len, N, endpoint=False))`.
   * `strength` < 1 starts the grid lower, as `LatentConsistencyModelImg2ImgPipeline`
   * asks for it (diffusers 0.25 `LCMScheduler.set_timesteps(..., strength)`).
   *
   * @throws RangeError when N is not a positive integer, exceeds
   *   `original_inference_steps`, or is more than `int(orig · strength)`
   */
  setTimesteps(numInferenceSteps: number, strength = 1): void {
    const T = this.#numTrainTimesteps;
    const orig = this.#originalSteps;
    if (!Number.isInteger(numInferenceSteps) || numInferenceSteps < 1) {
      throw new RangeError(
        `numInferenceSteps must be a positive integer, got ${numInferenceSteps}`,
      );
    }
    if (!(strength > 0 && strength <= 1)) {
      throw new RangeError(`lcm strength must be in (0, 1], got ${strength}`);
    }
    if (orig > T) {
      throw new RangeError(
        `lcm original_inference_steps (${orig}) cannot exceed num_train_timesteps (${T})`,
      );
    }
    const k = Math.floor(T / orig);
    const length = Math.floor(orig * strength);
    if (numInferenceSteps > orig) {
      throw new RangeError(
        `lcm numInferenceSteps (${numInferenceSteps}) cannot exceed original_inference_steps (${orig})`,
      );
    }
    if (Math.floor(length / numInferenceSteps) < 1) {
      throw new RangeError(
        `lcm: original_inference_steps × strength = ${orig} × ${strength} leaves ${length} ` +
          `timesteps, fewer than numInferenceSteps (${numInferenceSteps})`,
      );
    }
    const origin = Array.from({ length }, (_, i) => (i + 1) * k - 1).reverse();
    const stride = origin.length / numInferenceSteps;
    this.#timesteps = Array.from(
      { length: numInferenceSteps },
      (_, i) => origin[Math.floor(i * stride)],
    );
    this.#stepIndex = null;
  }

  /** See {@link Scheduler.scaleModelInput}; identity for LCM. */
  scaleModelInput(sample: Float32Array, _t: number): Float32Array {
    return sample;
  }

  /**
   * See {@link Scheduler.step}; applies the consistency boundary condition (c_skip, c_out)
   * and, except on the last step, re-noises `denoised` with `generator.randn`;
   * `generator` is required on every step.
   */
  step(
    modelOutput: Float32Array,
    t: number,
    sample: Float32Array,
    generator?: TorchGenerator,
  ): StepResult {
    requireTimesteps("lcm", this.#timesteps);
    checkSameLength("lcm.step", { sample, modelOutput });
    const gen = requireGenerator("lcm", generator);
    if (this.#stepIndex === null) this.#stepIndex = indexForTimestep(this.#timesteps, t, "error");
    const index = this.#stepIndex;
    const n = this.#timesteps.length;
    requireStepLeft("lcm", index, n);
    // 1. the previous timestep is the next one in the list (t itself at the end)
    const prevT = index + 1 < n ? this.#timesteps[index + 1] : t;
    // 2. alphas, betas
    const aT = alphaAt(this.#alphasCumprod, t);
    const aPrev = alphaPrevAt(this.#alphasCumprod, prevT, this.#finalAlphaCumprod);
    const sa = Math.sqrt(aT), sb = Math.sqrt(1 - aT);
    // 3. boundary-condition scalings c_skip, c_out
    const st = t * this.#timestepScaling;
    const cSkip = SIGMA_DATA ** 2 / (st * st + SIGMA_DATA ** 2);
    const cOut = st / Math.sqrt(st * st + SIGMA_DATA ** 2);
    // 4. predicted x0, clipped if configured
    let x0 = predictOriginalVp(this.#prediction, sa, sb, modelOutput, sample);
    if (this.#clipSample) x0 = clipSample(x0, this.#clipRange);
    // 5. the consistency-model output
    const denoised = x0.map((v, i) => cOut * v + cSkip * sample[i]);
    // 6. re-noise to prevT except on the last step
    let prevSample: Float32Array;
    if (index !== n - 1) {
      const noise = gen.randn(sample.length);
      const sp = Math.sqrt(aPrev), sq = Math.sqrt(1 - aPrev);
      prevSample = denoised.map((d, i) => sp * d + sq * noise[i]);
    } else {
      prevSample = denoised.slice();
    }
    this.#stepIndex = index + 1;
    return { prevSample, predOriginalSample: denoised };
  }

  /** See {@link Scheduler.addNoise}; `sqrt(ᾱ_t) x0 + sqrt(1-ᾱ_t) noise`. */
  addNoise(original: Float32Array, noise: Float32Array, t: number): Float32Array {
    checkSameLength("lcm.addNoise", { original, noise });
    return addNoiseAlpha(this.#alphasCumprod, original, noise, t);
  }
}
