/**
 * The denoising loop every mode shares (diffusers `__call__` step 8 of the
 * text-to-image, ControlNet, inpaint and image-to-image pipelines): the CFG
 * batch or, for prompts of different lengths, one batch-1 pass per prompt;
 * `scale_model_input`; the ControlNet residuals; the UNet; guidance;
 * `scheduler.step` with the request's generator; and for inpainting the known
 * latents blended back after every step. The engine (engine.ts) prepares a
 * {@link Loop} per mode and decodes what this returns.
 *
 * @module
 */

import {
  castFloatTensor,
  type Feeds,
  floatTensor,
  releaseDeviceTensor,
  type Tensor,
  timestepTensor,
  toFloat32,
} from "../onnx/mod.ts";
import type { TorchGenerator } from "../random/mod.ts";
import type { Scheduler } from "../schedulers/mod.ts";
import type { ControlNetRun } from "./controlnet.ts";
import type { GenerationSettings } from "./engine_config.ts";
import { applyGuidance, guidanceScaleEmbedding } from "./guidance.ts";
import { repeatBatch } from "./image_tensors.ts";
import { blendKnownLatents } from "./inpaint.ts";
import type { LoadedModel, ModelSet } from "./load_models.ts";
import type { PromptEmbeddings } from "./text_encoding.ts";

/** What one run carries through the pipelines. */
export interface Run {
  models: ModelSet;
  settings: GenerationSettings;
  /** Throws a {@link CancelledError} when the request was cancelled. */
  boundary: (where: string) => void;
  /** Reports steps done of the run's total. */
  progress: (step: number, total: number) => void;
}

/** Encoded prompts and how the UNet is driven with them. */
export interface Prompts {
  text: PromptEmbeddings;
  notes: string[];
  /** Classifier-free guidance (batch 2, uncond first). */
  cfg: boolean;
  /** The UNet is LCM-distilled (`timestep_cond`, no CFG). */
  lcm: boolean;
  batch: number;
}

/** The inputs of one denoising loop. */
export interface Loop {
  unet: LoadedModel;
  prompts: Prompts;
  scheduler: Scheduler;
  timesteps: number[];
  latents: Float32Array;
  generator: TorchGenerator;
  dims: [number, number, number, number];
  /** One per UNet pass ({@link passesOf}), or null without a ControlNet. */
  controlRuns: ControlNetRun[] | null;
  inpaint: { imageLatents: Float32Array; mask: Uint8Array; noise: Float32Array } | null;
  /** Called after step `i` (1-based) of this loop. */
  progress: (i: number) => void;
  /** Appended to cancellation messages (" of tile 2 of 9"). */
  where?: string;
}

/**
 * The UNet passes of a step: the prompts' batch in one pass, or, when
 * their encodings differ in length (`text_encoding.ts`), each prompt in its
 * own batch-1 pass, negative first, so the outputs concatenate to the same
 * `[uncond; text]` layout guidance reads.
 */
export function passesOf(prompts: Prompts): Array<{ hidden: Tensor; batch: number }> {
  const text = prompts.text;
  if (text.hidden) return [{ hidden: text.hidden, batch: prompts.batch }];
  return text.parts.map((hidden) => ({ hidden, batch: 1 }));
}

/** Throws unless the passes filled the whole batch. */
function checkedLength(values: Float32Array, filled: number, dims: readonly number[]): void {
  if (filled !== values.length) {
    throw new Error(`unet passes gave ${filled} values for a batch of shape [${dims}]`);
  }
}

/**
 * The denoising loop over `timesteps` (diffusers `__call__` step 8 of the
 * text-to-image, ControlNet and image-to-image pipelines): CFG batch,
 * `scale_model_input`, the ControlNet residuals, the UNet, guidance,
 * `scheduler.step` with the request's generator, and for inpainting the
 * known latents blended back after every step.
 */
export async function denoise(
  run: Run,
  loop: Loop,
): Promise<{ latents: Float32Array; denoised?: Float32Array }> {
  const { unet, prompts, scheduler, timesteps, generator, dims, controlRuns, inpaint } = loop;
  const [, channels, lh, lw] = dims;
  const unetIo = unet.io;
  let timestepCond: Feeds = {};
  if (prompts.lcm) {
    const cond = unetIo.inputs.timestep_cond;
    const width = cond.shape[1] as number;
    timestepCond = {
      [cond.name]: floatTensor(
        cond.dtype,
        guidanceScaleEmbedding(run.settings.guidanceScale, width),
        [1, width],
      ),
    };
  }
  // The UNet passes of one step: the whole batch at once, or (prompts of different lengths,
  // AUTOMATIC1111's default with pad_cond_uncond off) each prompt alone at batch 1.
  const passes = passesOf(prompts).map((pass, k) => ({
    batch: pass.batch,
    dims: [pass.batch, channels, lh, lw],
    controlRun: controlRuns?.[k] ?? null,
    fixed: {
      ...timestepCond,
      // On the GPU it already has the UNet's dtype (device_outputs.ts): no copy, no upload.
      [unetIo.inputs.encoder_hidden_states.name]: castFloatTensor(
        pass.hidden,
        unetIo.inputs.encoder_hidden_states.dtype,
      ),
    } as Feeds,
  }));
  const batch = prompts.batch;
  const sampleDims = [batch, channels, lh, lw];
  const outName = unetIo.outputs.out_sample.name;
  const where = loop.where ?? "";

  let latents = loop.latents;
  let denoised: Float32Array | undefined;
  for (let i = 0; i < timesteps.length; i++) {
    run.boundary(`before step ${i + 1} of ${timesteps.length}${where}`);
    const t = timesteps[i];
    const scaled = scheduler.scaleModelInput(latents, t);
    const predicted = new Float32Array(batch * scaled.length);
    let filled = 0;
    for (const pass of passes) {
      const sample = repeatBatch(scaled, pass.batch);
      const feeds: Feeds = {
        ...pass.fixed,
        [unetIo.inputs.sample.name]: floatTensor(unetIo.inputs.sample.dtype, sample, pass.dims),
        [unetIo.timestep!.name]: timestepTensor(unetIo.timestep!, t, pass.batch),
      };
      const residuals = pass.controlRun
        ? await pass.controlRun.residuals(sample, pass.dims, t)
        : {};
      Object.assign(feeds, residuals);
      let out: Record<string, Tensor>;
      try {
        out = await unet.session.run(feeds, [outName]);
      } finally {
        // Residuals left on the GPU by the ControlNet are read by this step only.
        for (const r of Object.values(residuals)) releaseDeviceTensor(r);
      }
      const part = checkedOutput(out[outName], pass.dims, outName);
      predicted.set(part, filled);
      filled += part.length;
    }
    checkedLength(predicted, filled, sampleDims);
    const noisePred = prompts.cfg
      ? applyGuidance(predicted, run.settings.guidanceScale)
      : predicted;
    const result = scheduler.step(noisePred, t, latents, generator);
    latents = result.prevSample;
    denoised = result.predOriginalSample;
    if (inpaint) {
      // pipeline_controlnet_inpaint.py L1457-1470: known latents noised to the next
      // timestep with the initial noise; the last step uses the clean image latents.
      const known = i < timesteps.length - 1
        ? scheduler.addNoise(inpaint.imageLatents, inpaint.noise, timesteps[i + 1])
        : inpaint.imageLatents;
      latents = blendKnownLatents(Float32Array.from(latents), known, inpaint.mask);
    }
    loop.progress(i + 1);
  }
  return { latents, denoised };
}

/** The UNet output of one pass as float32, or an error naming what is wrong with it. */
function checkedOutput(
  tensor: Tensor | undefined,
  dims: readonly number[],
  name: string,
): Float32Array {
  if (!tensor) throw new Error(`unet returned no \`${name}\` output`);
  if (tensor.dims.join(",") !== dims.join(",")) {
    throw new Error(`unet output \`${name}\`: expected shape [${dims}], got [${tensor.dims}]`);
  }
  return toFloat32(tensor);
}
