/**
 * Trajectory Consistency Distillation's Strategic Stochastic Sampling:
 * huggingface/diffusers v0.27.2 `src/diffusers/schedulers/scheduling_tcd.py`
 * (`TCDScheduler.__init__` L196-252, `index_for_timestep` L254-267,
 * `set_timesteps` L361-520 without the custom `timesteps` list, `step`
 * L522-625, `add_noise` L627-648), after Zheng et al., "Trajectory Consistency
 * Distillation" (arXiv:2402.19159), the sampler ByteDance's Hyper-SD unified
 * LoRA is published for (arXiv:2404.13686). Later diffusers releases change
 * only type hints, docstrings and error texts of the code followed here (up
 * to v0.40.0).
 *
 * Every value is rounded to float32 where torch computes on float32 tensors
 * (`alphas_cumprod`, its square roots, each elementwise product and sum), so
 * the results equal diffusers' to the last bit or so
 * (`testdata/make_tcd_reference.py` records them).
 *
 * @module
 */

import type { TorchGenerator } from "../random/mod.ts";
import { checkSameLength, requireGenerator, requireStepLeft, requireTimesteps } from "./checks.ts";
import type { Scheduler, StepResult } from "./scheduler.ts";
import type { PredictionType, SchedulerConfig } from "./scheduler_config.ts";
import { indexForTimestep } from "./sigma_schedule.ts";
import { addNoiseAlpha, alphaAt, trainingSchedule } from "./training.ts";

const fround = Math.fround;

/** Options the factory resolves for {@link TcdScheduler}. */
export interface TcdOptions {
  /**
   * η, the paper's γ (`step(eta=…)`): the share of each step's way down that
   * is re-noised, 0 = deterministic, 1 = every step predicts x0 and re-noises
   * to the next timestep as LCM does. Default 0.3, `TCDScheduler.step`'s own
   * default (the pipelines pass their `eta`, 0 unless given).
   */
  eta?: number;
}

/**
 * TCD: each step predicts x0 and ε, moves them to the intermediate timestep
 * s = ⌊(1 − η) · t_prev⌋ (`pred_noised_sample`), and, except on the last
 * step and at η = 0, re-noises from s to the next timestep t_prev with
 * `generator.randn`. One step (η irrelevant then) gives the x0 estimate
 * noised to timestep 0's level, which the pipeline decodes.
 *
 * `timestep_spacing` and `steps_offset` do not apply: `TCDScheduler` keeps
 * them in its config and never reads them; its timesteps always come from the
 * `original_inference_steps` grid, as LCM's do. `clip_sample` and
 * `thresholding` are likewise stored and never applied by its `step`.
 */
export class TcdScheduler implements Scheduler {
  /** See {@link Scheduler.name}; `"tcd"` (diffusers `TCDScheduler`). */
  readonly name = "tcd" as const;
  /** See {@link Scheduler.initNoiseSigma}; always 1 for this variance-preserving scheduler. */
  readonly initNoiseSigma = 1;
  readonly #alphasCumprod: Float32Array;
  readonly #numTrainTimesteps: number;
  readonly #prediction: PredictionType;
  readonly #originalSteps: number;
  readonly #eta: number;
  #timesteps: number[] = [];
  #stepIndex: number | null = null;

  /**
   * Builds the training schedule from `config` (`TCDScheduler.__init__`; class
   * defaults scaled_linear 0.00085..0.012, original_inference_steps 50).
   * `set_alpha_to_one` only sets `final_alpha_cumprod`, which `step` reads
   * for a negative previous timestep, and TCD's previous timestep is never
   * below 0.
   *
   * @throws RangeError when eta is outside 0..1 (diffusers asserts it in `step`)
   */
  constructor(config: SchedulerConfig, options: TcdOptions = {}) {
    const eta = options.eta ?? 0.3;
    if (!Number.isFinite(eta) || eta < 0 || eta > 1) {
      throw new RangeError(`tcd eta (gamma) must be in 0..1, got ${eta}`);
    }
    const schedule = trainingSchedule(config, {
      numTrainTimesteps: 1000,
      betaStart: 0.00085,
      betaEnd: 0.012,
      betaSchedule: "scaled_linear",
    });
    this.#alphasCumprod = schedule.alphasCumprod;
    this.#numTrainTimesteps = schedule.numTrainTimesteps;
    this.#prediction = config.predictionType ?? "epsilon";
    this.#originalSteps = config.originalInferenceSteps ?? 50;
    this.#eta = eta;
  }

  /** η (γ) of every step. */
  get eta(): number {
    return this.#eta;
  }

  /** See {@link Scheduler.timesteps}; N integer timesteps from the TCD grid, descending. */
  get timesteps(): number[] {
    return this.#timesteps.slice();
  }

  /**
   * See {@link Scheduler.setTimesteps} (`TCDScheduler.set_timesteps`, L395-517):
   *
   * - without `originalInferenceSteps` the grid is the config's
   *   `original_inference_steps` (default 50) distillation steps,
   *   `arange(1, int(orig · strength) + 1) · (T // orig) − 1`;
   * - with it (the argument, as a pipeline passes its own) diffusers takes
   *   every training timestep instead, `arange(0, int(T · strength))`, and
   *   uses the argument only to bound N;
   *
   * then reversed and sampled at `floor(linspace(0, len, N, endpoint=False))`.
   * `strength` < 1 starts the grid lower, for image-to-image.
   *
   * @throws RangeError as diffusers raises ValueError: N not a positive
   *   integer or above T, `int(orig · strength)`-long grid shorter than N,
   *   N above `original_inference_steps`, or `original_inference_steps` above T
   */
  setTimesteps(numInferenceSteps: number, strength = 1, originalInferenceSteps?: number): void {
    const T = this.#numTrainTimesteps;
    if (!Number.isInteger(numInferenceSteps) || numInferenceSteps < 1) {
      throw new RangeError(
        `numInferenceSteps must be a positive integer, got ${numInferenceSteps}`,
      );
    }
    if (!(strength > 0 && strength <= 1)) {
      throw new RangeError(`tcd strength must be in (0, 1], got ${strength}`);
    }
    if (
      originalInferenceSteps !== undefined &&
      (!Number.isInteger(originalInferenceSteps) || originalInferenceSteps < 1)
    ) {
      throw new RangeError(
        `tcd originalInferenceSteps must be a positive integer, got ${originalInferenceSteps}`,
      );
    }
    const orig = originalInferenceSteps ?? this.#originalSteps;
    // 1. The training/distillation grid, ascending.
    let origin: number[];
    if (originalInferenceSteps === undefined) {
      if (orig > T) {
        throw new RangeError(
          `tcd original_inference_steps (${orig}) cannot be larger than num_train_timesteps (${T})`,
        );
      }
      const k = Math.floor(T / orig);
      // int(original_steps * strength): a double product, truncated.
      origin = Array.from({ length: Math.floor(orig * strength) }, (_, i) => (i + 1) * k - 1);
    } else {
      origin = Array.from({ length: Math.floor(T * strength) }, (_, i) => i);
    }
    // 2.2 The inference schedule.
    if (numInferenceSteps > T) {
      throw new RangeError(
        `tcd numInferenceSteps (${numInferenceSteps}) cannot be larger than num_train_timesteps (${T})`,
      );
    }
    if (Math.floor(origin.length / numInferenceSteps) < 1) {
      throw new RangeError(
        `tcd: original_inference_steps × strength = ${orig} × ${strength} is smaller than ` +
          `numInferenceSteps (${numInferenceSteps}): use fewer steps or a higher strength`,
      );
    }
    if (numInferenceSteps > orig) {
      throw new RangeError(
        `tcd numInferenceSteps (${numInferenceSteps}) cannot be larger than ` +
          `original_inference_steps (${orig})`,
      );
    }
    origin.reverse();
    // np.linspace(0, len, num=N, endpoint=False) = i · (len / N), floored.
    const stride = origin.length / numInferenceSteps;
    this.#timesteps = Array.from(
      { length: numInferenceSteps },
      (_, i) => origin[Math.floor(i * stride)],
    );
    this.#stepIndex = null;
  }

  /** See {@link Scheduler.scaleModelInput}; identity for TCD. */
  scaleModelInput(sample: Float32Array, _t: number): Float32Array {
    return sample;
  }

  /**
   * See {@link Scheduler.step} (`TCDScheduler.step`, L554-620). `generator`
   * is needed when η > 0 on every step but the last, where diffusers draws
   * `randn_tensor(model_output.shape, generator)`. `predOriginalSample` is
   * the x0 estimate of step 3; `prevSample` on the last step (or at η = 0) is
   * `pred_noised_sample`, that x0 noised to s, which is what diffusers
   * returns and its pipelines decode.
   */
  step(
    modelOutput: Float32Array,
    t: number,
    sample: Float32Array,
    generator?: TorchGenerator,
  ): StepResult {
    requireTimesteps("tcd", this.#timesteps);
    checkSameLength("tcd.step", { sample, modelOutput });
    if (this.#stepIndex === null) this.#stepIndex = indexForTimestep(this.#timesteps, t, "error");
    const index = this.#stepIndex;
    const n = this.#timesteps.length;
    requireStepLeft("tcd", index, n);
    const ac = this.#alphasCumprod;
    // 1. The previous timestep (0 after the last), and s = floor((1 - eta) * prev):
    //    a Python float times an int64 tensor is a float32 product in torch.
    const prevT = index + 1 < n ? this.#timesteps[index + 1] : 0;
    const s = Math.floor(fround(fround(1 - this.#eta) * prevT));
    // 2. alphas, betas (float32 tensors)
    const aT = alphaAt(ac, t);
    const aPrev = alphaAt(ac, prevT);
    const aS = alphaAt(ac, s);
    const saT = fround(Math.sqrt(aT)), sbT = fround(Math.sqrt(fround(1 - aT)));
    const saS = fround(Math.sqrt(aS)), sbS = fround(Math.sqrt(fround(1 - aS)));
    // 3. x0 and epsilon for the parameterisation, then the noised sample at s.
    const len = sample.length;
    const x0 = new Float32Array(len);
    const eps = new Float32Array(len);
    if (this.#prediction === "epsilon") {
      for (let i = 0; i < len; i++) {
        x0[i] = fround(fround(sample[i] - fround(sbT * modelOutput[i])) / saT);
        eps[i] = modelOutput[i];
      }
    } else {
      // v-prediction: x0 = α x − σ v, ε = α v + σ x (alpha_prod_t ** 0.5 etc., float32).
      for (let i = 0; i < len; i++) {
        x0[i] = fround(fround(saT * sample[i]) - fround(sbT * modelOutput[i]));
        eps[i] = fround(fround(saT * modelOutput[i]) + fround(sbT * sample[i]));
      }
    }
    const noised = new Float32Array(len);
    for (let i = 0; i < len; i++) noised[i] = fround(saS * x0[i]) + fround(sbS * eps[i]);
    // 4. Re-noise from s to prev, except on the last step or at eta = 0.
    let prevSample = noised;
    if (this.#eta > 0 && index !== n - 1) {
      const noise = requireGenerator("tcd (eta > 0)", generator).randn(len);
      const ratio = fround(aPrev / aS);
      const c1 = fround(Math.sqrt(ratio)), c2 = fround(Math.sqrt(fround(1 - ratio)));
      prevSample = new Float32Array(len);
      for (let i = 0; i < len; i++) prevSample[i] = fround(c1 * noised[i]) + fround(c2 * noise[i]);
    }
    this.#stepIndex = index + 1;
    return { prevSample, predOriginalSample: x0 };
  }

  /** See {@link Scheduler.addNoise}; `sqrt(ᾱ_t) x0 + sqrt(1-ᾱ_t) noise`. */
  addNoise(original: Float32Array, noise: Float32Array, t: number): Float32Array {
    checkSameLength("tcd.addNoise", { original, noise });
    return addNoiseAlpha(this.#alphasCumprod, original, noise, t);
  }
}
