/**
 * The Stable Diffusion 1.5 engine: owns the ONNX sessions (loaded once by
 * {@link createEngine}) and runs one generation at a time — text encoding,
 * the denoising loop (denoise.ts) with its ControlNet hook, inpaint blending, image-to-image
 * from an encoded image, tiled upscaling and VAE decoding. Runs wherever the
 * sessions live (the Worker in production, in-process in tests). Sources:
 * diffusers `pipeline_onnx_stable_diffusion.py`,
 * `pipeline_latent_consistency_text2img.py`, `pipeline_controlnet_inpaint.py`,
 * `pipeline_stable_diffusion_img2img.py` (image_to_image.ts), AUTOMATIC1111's
 * SD upscale script (upscale.ts); the ControlNet hook as OnnxStack runs it
 * (controlnet.ts); the schedulers of `src/diffusers/schedulers/`.
 *
 * @module
 */

import { releaseDeviceTensor, type Tensor } from "../onnx/mod.ts";
import { ToolError } from "../mcp/tool.ts";
import { TorchGenerator } from "../random/mod.ts";
import { createScheduler, type Scheduler } from "../schedulers/mod.ts";
import { ControlNetRun } from "./controlnet.ts";
import { denoise, passesOf, type Prompts, type Run } from "./denoise.ts";
import { buildControlImage } from "./control_image.ts";
import { basePaths, type EngineConfig, type GenerationSettings } from "./engine_config.ts";
import { CancelledError } from "./errors.ts";
import { checkMask, checkRgb, repeatBatch } from "./image_tensors.ts";
import {
  type ImageToImagePipeline,
  type ImageToImageSchedule,
  imageToImageSchedule,
} from "./image_to_image.ts";
import { initialNoise, latentDims, scaleNoise } from "./initial_latents.ts";
import { blendKnownLatents, latentMask, pasteUnmasked } from "./inpaint.ts";
import {
  type ControlNetKind,
  defaultBytesOpener,
  defaultOpener,
  defaultRewriteCacheOpener,
  type LoadedModel,
  loadModels,
  type ModelSet,
  releaseModels,
} from "./load_models.ts";
import type { BytesOpener, RewriteCacheOpener, SessionOpener } from "./model_session.ts";
import { encodePrompts } from "./text_encoding.ts";
import type { EmbeddingUse, GenerationRequest, GenerationResult, RgbImage } from "./types.ts";
import { cropTile, TileBlender, tileGrid } from "./upscale.ts";
import { decodeLatents, encodeImage } from "./vae.ts";

/** Options of {@link createEngine}. */
export interface EngineOptions {
  /** Opens a model file; tests pass a wrapper to observe runs. Default: `mod/onnx` `createSession`. */
  openSession?: SessionOpener;
  /**
   * Opens a model rewritten in memory (the VAE encoder, see `load_models.ts`
   * `openVaeEncoder`); tests wrap it like `openSession`. Default: `mod/onnx`
   * `createSessionFromBytes`.
   */
  openBytes?: BytesOpener;
  /**
   * Opens what an earlier start cached of a rewritten model (the VAE
   * encoder's optimised graph). Default: `mod/onnx` `openCachedRewrite`.
   */
  openCachedRewrite?: RewriteCacheOpener;
}

/** Options of one {@link Engine.generate} call. */
export interface EngineRunOptions {
  /** Polled at every step boundary; true stops the run with a {@link CancelledError}. */
  isCancelled?: () => boolean;
  /** Aborting stops the run at the next step boundary (in-process use). */
  signal?: AbortSignal;
  /**
   * Called after every denoising step: steps done, total steps (the
   * scheduler's timesteps; for image-to-image the kept ones; for an upscale
   * those of every tile).
   */
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
  /**
   * How the VAE encoder gives its latent distribution (`mod/onnx`
   * `exposeLatentParameters`), or null when it is not loaded.
   */
  vaeEncoder: "parameters" | "deterministic" | "rewritten" | null;
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
  const models = await loadModels(
    config,
    options.openSession ?? defaultOpener,
    options.openBytes ?? defaultBytesOpener,
    options.openCachedRewrite ?? defaultRewriteCacheOpener,
  );
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
  // Every strength the server may ask for must keep at least one step of this schedule.
  for (const { key, value } of config.imageToImage?.strengths ?? []) {
    try {
      imageToImageSchedule(
        newScheduler(models, config.generation),
        config.generation.steps,
        value,
        imageToImagePipeline(models, config.generation),
      );
    } catch (e) {
      await releaseModels(models);
      const g = config.generation;
      throw new Error(
        `${key} = ${value} cannot be used with scheduler "${g.scheduler}" and ${g.steps} steps ` +
          `(generation.scheduler, generation.steps, or the preset): ${(e as Error).message}`,
        { cause: e },
      );
    }
  }
  return new Engine(config, models);
}

/** The image-to-image pipeline diffusers would use for this UNet and scheduler (image_to_image.ts). */
function imageToImagePipeline(models: ModelSet, s: GenerationSettings): ImageToImagePipeline {
  if (s.scheduler === "tcd") return "tcd";
  return models.unet.io.hasTimestepCond === true && s.scheduler === "lcm"
    ? "latent_consistency"
    : "stable_diffusion";
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
  /**
   * GPU tensors the running generation holds (the text hidden states, shared
   * by every step and, for an upscale, every tile), freed when it ends.
   */
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
      vaeEncoder: m.vaeEncoder?.graph ?? null,
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
    const run: Run = {
      models,
      settings,
      boundary: (where: string) => {
        if (cancelled()) throw new CancelledError(`generation cancelled ${where}`);
      },
      progress: (step, total) => options.onProgress?.(step, total),
    };
    latentDims(request.width, request.height);
    run.boundary("before it started");
    switch (request.mode) {
      case "image_to_image":
      case "upscale_image":
        return await this.#fromImage(run, request);
      default:
        return await this.#fromNoise(run, request);
    }
  }

  /** Text-to-image, guided and inpaint: the denoising loop from pure noise. */
  async #fromNoise(
    run: Run,
    request: Extract<
      GenerationRequest,
      { mode: "text_to_image" | "guided_image" | "inpaint_image" }
    >,
  ): Promise<GenerationResult> {
    const { models, settings, boundary } = run;
    const { width, height } = request;
    const dims = latentDims(width, height);
    const [, , lh, lw] = dims;

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
      checkInputImage(request.image, width, height);
      if (request.mode === "inpaint_image") checkMask(request.mask, width, height);
    }
    const unet = control ? models.controlnetUnet! : models.unet;
    const prompts = await this.#prompts(run, unet, request.positive, request.negative);
    boundary("after text encoding");

    // Scheduler and the generator's draws, in diffusers' order: for inpainting the image
    // latents' sample first, then the noise, then the masked image's (prepare_latents,
    // prepare_mask_latents of pipeline_controlnet_inpaint.py); the same generator then feeds
    // the stochastic steps.
    const scheduler = newScheduler(models, settings);
    const timesteps = Array.from(scheduler.timesteps as ArrayLike<number>);
    const generator = new TorchGenerator(request.seed);
    let imageLatents: Float32Array | null = null;
    if (request.mode === "inpaint_image") {
      imageLatents = await encodeImage(
        this.#requireEncoder("inpaint_image").session,
        models.vaeEncoder!.io,
        request.image,
        generator,
      );
      boundary("after encoding the input image");
    }
    const noise = initialNoise(generator, width, height);
    // masked_image_latents = _encode_vae_image(masked_image, generator): a 4-channel UNet
    // never reads them, but their sample is drawn, so the later draws are diffusers'.
    if (imageLatents) generator.randn(noise.length);
    const latents = scaleNoise(noise, scheduler.initNoiseSigma);

    // Control image, and for inpainting the latent mask.
    let controlRuns: ControlNetRun[] | null = null;
    if (control && request.mode !== "text_to_image") {
      const cond = await buildControlImage(request, models);
      boundary("after preprocessing");
      // One ControlNet run per UNet pass: the batch, or each prompt at its own length.
      controlRuns = passesOf(prompts).map((pass) =>
        new ControlNetRun(
          control.model,
          unet.io,
          pass.hidden,
          repeatBatch(cond, pass.batch),
          [pass.batch, 3, height, width],
        )
      );
    }
    const inpaint = request.mode === "inpaint_image"
      ? { imageLatents: imageLatents!, mask: latentMask(request.mask, lw, lh), noise }
      : null;

    const result = await denoise(run, {
      unet,
      prompts,
      scheduler,
      timesteps,
      latents,
      generator,
      dims,
      controlRuns,
      inpaint,
      progress: (i) => run.progress(i, timesteps.length),
    });
    boundary("before decoding");
    let image = await this.#decode(run, result, dims, inpaint);
    if (request.mode === "inpaint_image") image = pasteUnmasked(image, request.image, request.mask);
    return { image, notes: prompts.notes, embeddingsUsed: this.#embeddingsUsed(prompts) };
  }

  /**
   * `transform_image`: diffusers' image-to-image on the request's image
   * (`image_to_image.ts`). `upscale_image`: the image, already enlarged to the
   * output size, refined tile by tile, each tile one image-to-image run with
   * seed `seed + i` (the SD upscale script's `p.seed = processed.seed + 1` per
   * tile), then blended (`upscale.ts`). One progress total over all tiles.
   */
  async #fromImage(
    run: Run,
    request: Extract<GenerationRequest, { mode: "image_to_image" | "upscale_image" }>,
  ): Promise<GenerationResult> {
    const upscale = request.mode === "upscale_image";
    this.#requireEncoder(upscale ? "upscale_image" : "transform_image");
    checkInputImage(request.image, request.width, request.height);
    const grid = upscale ? tileGrid(request.width, request.height) : null;
    const prompts = await this.#prompts(run, run.models.unet, request.positive, request.negative);
    run.boundary("after text encoding");
    const kept = this.#schedule(run, request.strength).timesteps.length;
    if (!grid) {
      const image = await this.#imageToImage(run, prompts, request.image, request.strength, {
        seed: request.seed,
        progress: (i) => run.progress(i, kept),
      });
      return { image, notes: prompts.notes, embeddingsUsed: this.#embeddingsUsed(prompts) };
    }
    const total = kept * grid.tiles.length;
    const blender = new TileBlender(grid);
    for (let i = 0; i < grid.tiles.length; i++) {
      run.boundary(`before tile ${i + 1} of ${grid.tiles.length}`);
      const tile = cropTile(request.image, grid.tiles[i], grid.tile);
      const refined = await this.#imageToImage(run, prompts, tile, request.strength, {
        seed: (request.seed + i) % 2 ** 32,
        progress: (step) => run.progress(i * kept + step, total),
        where: ` of tile ${i + 1} of ${grid.tiles.length}`,
      });
      blender.add(i, refined);
    }
    return {
      image: blender.result(),
      notes: prompts.notes,
      embeddingsUsed: this.#embeddingsUsed(prompts),
    };
  }

  /** The image-to-image schedule of the configured scheduler at `strength`. */
  #schedule(run: Run, strength: number): ImageToImageSchedule {
    return imageToImageSchedule(
      newScheduler(run.models, run.settings),
      run.settings.steps,
      strength,
      imageToImagePipeline(run.models, run.settings),
    );
  }

  /**
   * One image-to-image run on `image` (`StableDiffusionImg2ImgPipeline`, or
   * `LatentConsistencyModelImg2ImgPipeline` for an LCM UNet; image_to_image.ts):
   * the image's latents (the generator's first draw), the noise (its second),
   * `add_noise` at the first kept timestep, the loop over the kept
   * timesteps, the decode.
   */
  async #imageToImage(
    run: Run,
    prompts: Prompts,
    image: RgbImage,
    strength: number,
    o: { seed: number; progress: (step: number) => void; where?: string },
  ): Promise<RgbImage> {
    const { models, boundary } = run;
    const where = o.where ?? "";
    const dims = latentDims(image.width, image.height);
    const scheduler = newScheduler(models, run.settings);
    const { timesteps } = imageToImageSchedule(
      scheduler,
      run.settings.steps,
      strength,
      imageToImagePipeline(models, run.settings),
    );
    const generator = new TorchGenerator(o.seed);
    const imageLatents = await encodeImage(
      models.vaeEncoder!.session,
      models.vaeEncoder!.io,
      image,
      generator,
    );
    boundary(`after encoding the input image${where}`);
    const noise = initialNoise(generator, image.width, image.height);
    const latents = scheduler.addNoise(imageLatents, noise, timesteps[0]);
    const result = await denoise(run, {
      unet: models.unet,
      prompts,
      scheduler,
      timesteps,
      latents,
      generator,
      dims,
      controlRuns: null,
      inpaint: null,
      progress: o.progress,
      where,
    });
    boundary(`before decoding${where}`);
    return await this.#decode(run, result, dims, null);
  }

  /** Encodes the prompts for `unet` (with the negative one under CFG) and says what applies. */
  async #prompts(
    run: Run,
    unet: LoadedModel,
    positive: string,
    negative: string,
  ): Promise<Prompts> {
    const { models, settings } = run;
    const lcm = unet.io.hasTimestepCond === true;
    const cfg = !lcm && settings.guidanceScale > 1;
    const text = await encodePrompts(
      models.tokenizer,
      models.textEncoder.session,
      models.textEncoder.io,
      positive,
      negative,
      cfg,
      models.promptReading,
    );
    if (text.hidden) this.#deviceTensors.push(text.hidden);
    const notes = [...text.notes];
    if (!cfg && negative.trim() !== "") {
      notes.push(
        lcm
          ? "the negative prompt is not used: this LCM UNet runs without classifier-free guidance"
          : `the negative prompt is not used: guidance_scale ${settings.guidanceScale} <= 1 ` +
            `runs without classifier-free guidance (the fast and turbo presets do)`,
      );
    }
    return { text, notes, cfg, lcm, batch: cfg ? 2 : 1 };
  }

  /** The embeddings the prompts called, with their files' short hashes (PNG metadata). */
  #embeddingsUsed(prompts: Prompts): EmbeddingUse[] {
    const known = this.#requireModels().promptReading.embeddings?.byName;
    return prompts.text.embeddingsUsed.map((name) => {
      const hash = known?.get(name)?.hash;
      return hash !== undefined ? { name, hash } : { name };
    });
  }

  /**
   * The VAE decode of the loop's result. LCM decodes the consistency model's
   * `denoised` estimate (pipeline_latent_consistency_text2img.py: `image =
   * vae.decode(denoised / scaling)`; on the last step the scheduler's
   * `prev_sample` is that same value, which is what the image-to-image
   * pipeline decodes).
   */
  async #decode(
    run: Run,
    result: { latents: Float32Array; denoised?: Float32Array },
    dims: [number, number, number, number],
    inpaint: { imageLatents: Float32Array; mask: Uint8Array } | null,
  ): Promise<RgbImage> {
    const { models, settings } = run;
    let final = result.latents;
    if (settings.scheduler === "lcm" && result.denoised) {
      final = Float32Array.from(result.denoised);
      if (inpaint) blendKnownLatents(final, inpaint.imageLatents, inpaint.mask);
    }
    return await decodeLatents(
      models.vaeDecoder.session,
      models.vaeDecoder.io,
      final,
      dims,
      models.vaeDecoderScale,
    );
  }

  /** The VAE encoder, or a configuration error naming the tool that needs it. */
  #requireEncoder(tool: string): LoadedModel {
    const encoder = this.#requireModels().vaeEncoder;
    if (!encoder) {
      throw new ToolError(
        "configuration",
        `${tool} needs the VAE encoder, which this engine was started without`,
      );
    }
    return encoder;
  }
}

/** Throws unless the input image is an RGB image of the request's size. */
function checkInputImage(image: RgbImage, width: number, height: number): void {
  checkRgb(image, "input image");
  if (image.width !== width || image.height !== height) {
    throw new RangeError(
      `input image is ${image.width}×${image.height}, expected ${width}×${height}`,
    );
  }
}
