/**
 * The Stable Diffusion 1.5 engine: owns the ONNX sessions (loaded once by
 * {@link createEngine}) and runs one generation at a time — text encoding,
 * the denoising loop with its ControlNet hook, inpaint blending and VAE
 * decoding. Runs wherever the sessions live (the Worker in production,
 * in-process in tests). Sources: diffusers `pipeline_onnx_stable_diffusion.py`,
 * `pipeline_latent_consistency_text2img.py`, `pipeline_controlnet_inpaint.py`
 * (sd15-onnx.md §1d, §2b, §3, §5).
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
import { ToolError } from "../mcp/tool.ts";
import { TorchGenerator } from "../random/mod.ts";
import { createScheduler, type Scheduler } from "../schedulers/mod.ts";
import { ControlNetRun } from "./controlnet.ts";
import { buildControlImage } from "./control_image.ts";
import { basePaths, type EngineConfig, type GenerationSettings } from "./engine_config.ts";
import { CancelledError } from "./errors.ts";
import { applyGuidance, guidanceScaleEmbedding } from "./guidance.ts";
import { checkMask, checkRgb, repeatBatch } from "./image_tensors.ts";
import { initialNoise, latentDims, scaleNoise } from "./initial_latents.ts";
import { blendKnownLatents, latentMask, pasteUnmasked } from "./inpaint.ts";
import {
  type ControlNetKind,
  defaultOpener,
  type LoadedModel,
  loadModels,
  type ModelSet,
  releaseModels,
} from "./load_models.ts";
import type { SessionOpener } from "./model_session.ts";
import { encodePrompts } from "./text_encoding.ts";
import type { GenerationRequest, GenerationResult } from "./types.ts";
import { decodeLatents, encodeImage } from "./vae.ts";

/** Options of {@link createEngine}. */
export interface EngineOptions {
  /** Opens a model file; tests pass a wrapper to observe runs. Default: `mod/onnx` `createSession`. */
  openSession?: SessionOpener;
}

/** Options of one {@link Engine.generate} call. */
export interface EngineRunOptions {
  /** Polled at every step boundary; true stops the run with a {@link CancelledError}. */
  isCancelled?: () => boolean;
  /** Aborting stops the run at the next step boundary (in-process use). */
  signal?: AbortSignal;
  /** Called after every denoising step: steps done, total steps (= scheduler timesteps). */
  onProgress?: (step: number, total: number) => void;
  /** Per-run overrides of the configured generation settings (tests, benchmarks). */
  settings?: Partial<GenerationSettings>;
}

/** What was loaded, for logs and tests. */
export interface EngineInfo {
  /** Model file → component. */
  models: Record<string, string>;
  /** ControlNets ready to serve. */
  controlnets: ControlNetKind[];
  /** Whether the plain UNet is LCM-distilled (takes `timestep_cond`). */
  lcmUnet: boolean;
  /** The execution provider, and whether it computes in float16 (its start-up check). */
  provider: { name: string; float16: boolean };
}

/**
 * Opens and checks every model `config` needs. Rejects with an Error naming
 * the file and the problem.
 */
export async function createEngine(
  config: EngineConfig,
  options: EngineOptions = {},
): Promise<Engine> {
  const models = await loadModels(config, options.openSession ?? defaultOpener);
  try {
    // Build one scheduler now so a bad scheduler config fails at start-up, not per request.
    newScheduler(models, config.generation);
  } catch (e) {
    await releaseModels(models);
    const g = config.generation;
    throw new Error(
      `scheduler "${g.scheduler}" (generation.scheduler, karras = ${g.karras}, eta = ${g.eta}) ` +
        `cannot be set up from ${basePaths(config.models.base).schedulerConfig}: ` +
        (e as Error).message,
      { cause: e },
    );
  }
  return new Engine(config, models);
}

function newScheduler(models: ModelSet, s: GenerationSettings): Scheduler {
  const scheduler = createScheduler(s.scheduler, models.schedulerConfig, {
    timestepSpacing: s.timestepSpacing,
    karras: s.karras,
    eta: s.eta,
  });
  scheduler.setTimesteps(s.steps);
  return scheduler;
}

/** Config key that enables each control mode's ControlNet. */
const CONTROLNET_OF = {
  depth: "depth",
  openpose: "openpose",
  openpose_full: "openpose",
} as const;

/** The diffusion engine over a loaded model set. One generation at a time. */
export class Engine {
  readonly #config: EngineConfig;
  #models: ModelSet | null;
  #busy = false;
  /** GPU tensors the running generation holds (the text hidden states), freed when it ends. */
  readonly #deviceTensors: Tensor[] = [];

  /** Use {@link createEngine}. */
  constructor(config: EngineConfig, models: ModelSet) {
    this.#config = config;
    this.#models = models;
  }

  /** What was loaded. */
  get info(): EngineInfo {
    const m = this.#requireModels();
    const all: Array<[string, LoadedModel | undefined]> = [
      ["text_encoder", m.textEncoder],
      ["unet", m.unet],
      ["vae_decoder", m.vaeDecoder],
      ["vae_encoder", m.vaeEncoder],
      ["controlnet_unet", m.controlnetUnet],
      ["depth", m.depth],
      ["pose_detector", m.poseDetector],
      ["pose_estimator", m.poseEstimator],
    ];
    const models: Record<string, string> = {};
    for (const [name, model] of all) if (model) models[model.path] = name;
    for (const [kind, cn] of Object.entries(m.controlnets)) {
      models[cn.path] = `controlnet (${kind})`;
    }
    return {
      models,
      controlnets: Object.keys(m.controlnets) as ControlNetKind[],
      lcmUnet: m.unet.io.hasTimestepCond === true,
      provider: { name: m.provider.provider, float16: m.provider.float16 },
    };
  }

  /** Releases every session; later calls to {@link generate} fail. */
  async release(): Promise<void> {
    const models = this.#models;
    this.#models = null;
    if (models) await releaseModels(models);
  }

  /**
   * Runs one generation. Rejects with a `ToolError` for a disabled
   * ControlNet ("configuration"), {@link CancelledError} when cancelled, and
   * other errors for runtime failures.
   */
  async generate(
    request: GenerationRequest,
    options: EngineRunOptions = {},
  ): Promise<GenerationResult> {
    if (this.#busy) throw new Error("engine is busy: one generation at a time");
    this.#busy = true;
    try {
      return await this.#generate(request, options);
    } finally {
      for (const t of this.#deviceTensors.splice(0)) releaseDeviceTensor(t);
      this.#busy = false;
    }
  }

  #requireModels(): ModelSet {
    if (!this.#models) throw new Error("engine was released");
    return this.#models;
  }

  async #generate(
    request: GenerationRequest,
    options: EngineRunOptions,
  ): Promise<GenerationResult> {
    const models = this.#requireModels();
    const settings: GenerationSettings = { ...this.#config.generation, ...options.settings };
    const cancelled = () => options.isCancelled?.() === true || options.signal?.aborted === true;
    const boundary = (where: string) => {
      if (cancelled()) throw new CancelledError(`generation cancelled ${where}`);
    };
    const { width, height } = request;
    const dims = latentDims(width, height);
    const [, channels, lh, lw] = dims;
    boundary("before it started");

    // Which UNet and ControlNet.
    let control: {
      kind: ControlNetKind;
      model: NonNullable<ModelSet["controlnets"][ControlNetKind]>;
    } | null = null;
    if (request.mode !== "text_to_image") {
      const kind: ControlNetKind = request.mode === "inpaint_image"
        ? "inpaint"
        : CONTROLNET_OF[request.controlMode];
      const model = models.controlnets[kind];
      if (!model || !models.controlnetUnet) {
        const what = request.mode === "inpaint_image"
          ? "inpaint_image"
          : `control_mode "${request.controlMode}"`;
        throw new ToolError(
          "configuration",
          `${what} needs the ${kind} ControlNet, which is disabled in the server config ` +
            `(controlnet.${kind}.enabled = false)`,
        );
      }
      control = { kind, model };
      checkRgb(request.image, "input image");
      if (request.image.width !== width || request.image.height !== height) {
        throw new RangeError(
          `input image is ${request.image.width}×${request.image.height}, expected ${width}×${height}`,
        );
      }
      if (request.mode === "inpaint_image") checkMask(request.mask, width, height);
    }
    const unet = control ? models.controlnetUnet! : models.unet;
    const lcm = unet.io.hasTimestepCond === true;
    const cfg = !lcm && settings.guidanceScale > 1;
    const batch = cfg ? 2 : 1;

    // Text.
    const text = await encodePrompts(
      models.tokenizer,
      models.textEncoder.session,
      models.textEncoder.io,
      request.positive,
      request.negative,
      cfg,
    );
    this.#deviceTensors.push(text.hidden);
    const notes = [...text.notes];
    if (!cfg && request.negative.trim() !== "") {
      notes.push(
        lcm
          ? "the negative prompt is not used: this LCM UNet runs without classifier-free guidance"
          : `the negative prompt is not used: guidance_scale ${settings.guidanceScale} <= 1 ` +
            `runs without classifier-free guidance (the fast preset does)`,
      );
    }
    boundary("after text encoding");

    // Scheduler and noise; the same generator feeds stochastic steps.
    const scheduler = newScheduler(models, settings);
    const timesteps = Array.from(scheduler.timesteps as ArrayLike<number>);
    const generator = new TorchGenerator(request.seed);
    const noise = initialNoise(generator, width, height);
    let latents = scaleNoise(noise, scheduler.initNoiseSigma);

    // Control image, and for inpainting the image latents and latent mask.
    let controlRun: ControlNetRun | null = null;
    let inpaint: { imageLatents: Float32Array; mask: Uint8Array } | null = null;
    if (control && request.mode !== "text_to_image") {
      const cond = await buildControlImage(request, models);
      boundary("after preprocessing");
      controlRun = new ControlNetRun(
        control.model,
        unet.io,
        text.hidden,
        repeatBatch(cond, batch),
        [batch, 3, height, width],
      );
      if (request.mode === "inpaint_image") {
        if (!models.vaeEncoder) {
          throw new Error("inpainting is enabled but the VAE encoder is not loaded");
        }
        inpaint = {
          imageLatents: await encodeImage(
            models.vaeEncoder.session,
            models.vaeEncoder.io,
            request.image,
          ),
          mask: latentMask(request.mask, lw, lh),
        };
        boundary("after encoding the input image");
      }
    }

    // Feeds that do not change between steps.
    const unetIo = unet.io;
    const fixed: Feeds = {
      // On the GPU it already has the UNet's dtype (device_outputs.ts): no copy, no upload.
      [unetIo.inputs.encoder_hidden_states.name]: castFloatTensor(
        text.hidden,
        unetIo.inputs.encoder_hidden_states.dtype,
      ),
    };
    if (lcm) {
      const cond = unetIo.inputs.timestep_cond;
      const width = cond.shape[1] as number;
      fixed[cond.name] = floatTensor(
        cond.dtype,
        guidanceScaleEmbedding(settings.guidanceScale, width),
        [
          1,
          width,
        ],
      );
    }
    const sampleDims = [batch, channels, lh, lw];
    const outName = unetIo.outputs.out_sample.name;

    let denoised: Float32Array | undefined;
    for (let i = 0; i < timesteps.length; i++) {
      boundary(`before step ${i + 1} of ${timesteps.length}`);
      const t = timesteps[i];
      const scaled = scheduler.scaleModelInput(latents, t);
      const sample = repeatBatch(scaled, batch);
      const feeds: Feeds = {
        ...fixed,
        [unetIo.inputs.sample.name]: floatTensor(unetIo.inputs.sample.dtype, sample, sampleDims),
        [unetIo.timestep!.name]: timestepTensor(unetIo.timestep!, t, batch),
      };
      const residuals = controlRun ? await controlRun.residuals(sample, sampleDims, t) : {};
      Object.assign(feeds, residuals);
      let out: Record<string, Tensor>;
      try {
        out = await unet.session.run(feeds, [outName]);
      } finally {
        // Residuals left on the GPU by the ControlNet are read by this step only.
        for (const r of Object.values(residuals)) releaseDeviceTensor(r);
      }
      const predicted = checkedOutput(out[outName], sampleDims, outName);
      const noisePred = cfg ? applyGuidance(predicted, settings.guidanceScale) : predicted;
      const result = scheduler.step(noisePred, t, latents, generator);
      latents = result.prevSample;
      denoised = result.predOriginalSample;
      if (inpaint) {
        // pipeline_controlnet_inpaint.py L1457-1470: known latents noised to the next
        // timestep with the initial noise; the last step uses the clean image latents.
        const known = i < timesteps.length - 1
          ? scheduler.addNoise(inpaint.imageLatents, noise, timesteps[i + 1])
          : inpaint.imageLatents;
        latents = blendKnownLatents(Float32Array.from(latents), known, inpaint.mask);
      }
      options.onProgress?.(i + 1, timesteps.length);
    }
    boundary("before decoding");

    // LCM decodes the consistency model's `denoised` estimate
    // (pipeline_latent_consistency_text2img.py: `image = vae.decode(denoised / scaling)`).
    let final = latents;
    if (settings.scheduler === "lcm" && denoised) {
      final = Float32Array.from(denoised);
      if (inpaint) blendKnownLatents(final, inpaint.imageLatents, inpaint.mask);
    }
    let image = await decodeLatents(
      models.vaeDecoder.session,
      models.vaeDecoder.io,
      final,
      dims,
      models.vaeDecoderScale,
    );
    if (request.mode === "inpaint_image") image = pasteUnmasked(image, request.image, request.mask);
    return { image, notes };
  }
}

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
