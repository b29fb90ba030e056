/**
 * Start-up: checks the execution provider (a GPU provider must start and, for
 * fp16 models, compute in float16), opens every model the configuration
 * needs, once, and checks each against the I/O contract (`mod/onnx`
 * `checkSession`). Outputs that only feed another session stay on the GPU
 * (`device_outputs.ts`). Any problem is an error that names the file (or the
 * provider) and what is wrong; sessions opened before the failure are
 * released.
 *
 * @module
 */

import { dirname, join } from "node:path";
import {
  assertResidualsMatch,
  checkExecutionProvider,
  checkSession,
  type Component,
  createSession,
  createSessionFromBytes,
  ExecutionProviderError,
  exposeLatentParameters,
  type ExternalDataFile,
  GLIBC_TUNABLES,
  hugePages,
  LATENT_PARAMETERS,
  LATENT_PARAMETERS_REWRITE,
  MALLOC_HUGETLB,
  noFloat16Text,
  openCachedRewrite,
  type ProviderCheck,
  readModelInfo,
  type ResolvedIo,
  type SessionOptions,
  sessionThreads,
  threadsText,
  type VaeEncoderGraph,
} from "../onnx/mod.ts";
import { log } from "../log/mod.ts";
import { LoraSet } from "../lora/mod.ts";
import { ClipTokenizer } from "../tokenizer/mod.ts";
import { collectGarbage } from "./collect_garbage.ts";
import type { ControlNetModel } from "./controlnet.ts";
import { basePaths, type EngineConfig } from "./engine_config.ts";
import { errorMessage } from "./errors.ts";
import { type HiddenStatesConsumer, hiddenStatesPlan, residualsPlan } from "./device_outputs.ts";
import type {
  BytesOpener,
  ModelSession,
  RewriteCacheOpener,
  SessionOpener,
} from "./model_session.ts";
import { loadEmbeddings, PromptEmbeddingIndex } from "../prompt/mod.ts";
import type { PromptReading } from "./text_encoding.ts";
import { promptEmbeddings, textEncoderOpener } from "./text_encoder_open.ts";
import { VAE_SCALING_FACTOR } from "./vae.ts";

/** One opened and checked model. */
export interface LoadedModel {
  /** The model file. */
  path: string;
  /** The open session. */
  session: ModelSession;
  /** What `checkSession` resolved. */
  io: ResolvedIo;
}

/** The ControlNets the config can enable. */
export type ControlNetKind = "depth" | "openpose" | "inpaint";

/** Everything the engine runs, loaded once. */
export interface ModelSet {
  /** The execution provider's start-up check (`mod/onnx` `checkExecutionProvider`). */
  provider: ProviderCheck;
  /** CLIP tokenizer from `<base>/tokenizer`. */
  tokenizer: ClipTokenizer;
  /** How prompts are read (`[prompt] syntax`) and the embeddings the text encoder holds. */
  promptReading: PromptReading;
  /** `<base>/scheduler/scheduler_config.json`, parsed. */
  schedulerConfig: Record<string, unknown>;
  /** Text encoder. */
  textEncoder: LoadedModel;
  /** The plain UNet (text-to-image). */
  unet: LoadedModel;
  /** VAE decoder (the base folder's, or the tiny one). */
  vaeDecoder: LoadedModel;
  /**
   * What latents are divided by before decoding: SD 1.5's 0.18215 for the
   * full VAE, 1 for TAESD (it decodes the UNet's latents as they are: TAESD's README).
   */
  vaeDecoderScale: number;
  /**
   * VAE encoder, returning its latent distribution's parameters (rewritten at
   * load time when the export samples inside the graph); loaded when
   * image-to-image or inpainting is served.
   */
  vaeEncoder?: LoadedModel & { graph: VaeEncoderGraph["kind"] };
  /** The UNet that takes ControlNet residuals; only when a ControlNet is enabled. */
  controlnetUnet?: LoadedModel;
  /** Enabled ControlNets. */
  controlnets: Partial<Record<ControlNetKind, ControlNetModel & { path: string }>>;
  /** Depth estimator (controlnet.depth.preprocessor). */
  depth?: LoadedModel & { inputRange: "unit" | "signed" };
  /** DWPose person detector (controlnet.openpose.detector). */
  poseDetector?: LoadedModel;
  /** DWPose whole-body pose model (controlnet.openpose.estimator). */
  poseEstimator?: LoadedModel;
}

/** Opens a model with `mod/onnx`'s `createSession`. */
export const defaultOpener: SessionOpener = (path, options) => createSession(path, options);

/** Opens a model held in memory with `mod/onnx`'s `createSessionFromBytes`. */
export const defaultBytesOpener: BytesOpener = (model, options) =>
  // `readFrom`: with the optimised-graph cache on, the rewritten graph is cached (by the file
  // and the rewrite's name where there is one, else by its bytes).
  createSessionFromBytes(model.bytes, model.externalData, {
    ...options,
    readFrom: model.path,
    ...(model.rewrite !== undefined ? { rewrite: model.rewrite } : {}),
  });

/** Opens a rewritten model an earlier start cached, with `mod/onnx`'s `openCachedRewrite`. */
export const defaultRewriteCacheOpener: RewriteCacheOpener = (model, options) =>
  openCachedRewrite(model.path, model.rewrite, options);

/** Reads a JSON object, with errors naming the file. */
async function readJsonObject(path: string): Promise<Record<string, unknown>> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (e) {
    throw new Error(`${path}: cannot read the scheduler config: ${errorMessage(e)}`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new Error(`${path}: not valid JSON: ${errorMessage(e)}`);
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new Error(`${path}: expected a JSON object`);
  }
  return value as Record<string, unknown>;
}

/**
 * Loads the model set for `config`. ControlNets, the residual UNet and the
 * preprocessors are opened only when their `controlnet.*.enabled` needs them,
 * the VAE encoder when `imageToImage` or inpainting does (rewritten by
 * {@link openVaeEncoder}, then opened with `openBytes`). With `lora.files`
 * set, the text encoder and the UNet(s) are opened through `mod/lora`
 * (weights blended in memory) instead of `open`.
 */
export async function loadModels(
  config: EngineConfig,
  open: SessionOpener = defaultOpener,
  openBytes: BytesOpener = defaultBytesOpener,
  openCached: RewriteCacheOpener = defaultRewriteCacheOpener,
): Promise<ModelSet> {
  const paths = basePaths(config.models.base, config.models.vae);
  const provider = config.runtime.executionProvider;
  // Before any model: a provider that cannot start fails here with its cause and fix.
  const device = await checkExecutionProvider(provider, {
    intraOpThreads: config.runtime.intraOpThreads,
  });
  if (provider !== "cpu") {
    log("info", "pipeline", "execution provider ready", { provider, float16: device.float16 });
  }
  // Every session gets these (mod/onnx `ortSessionOptions` resolves 0 the same way).
  const threads = sessionThreads(config.runtime);
  const pages = hugePages();
  log("info", "pipeline", `ONNX Runtime sessions compute on ${threadsText(threads)}`, {
    intraOpThreads: threads.intraOp,
    interOpThreads: threads.interOp,
    configured: {
      intraOpThreads: config.runtime.intraOpThreads,
      interOpThreads: config.runtime.interOpThreads,
    },
    usableCores: threads.usableCores,
    hugePages: pages,
  });
  if (pages.system === "madvise" && !pages.malloc) {
    log(
      "info",
      "pipeline",
      "tensors get 4 KiB pages: the first image after a start and every run pay more page " +
        `faults; \`deno task serve\` sets ${GLIBC_TUNABLES}=${MALLOC_HUGETLB} (docs/performance.md)`,
    );
  }
  const options: SessionOptions = {
    executionProvider: config.runtime.executionProvider,
    intraOpThreads: config.runtime.intraOpThreads,
    interOpThreads: config.runtime.interOpThreads,
    graphOptimization: config.runtime.graphOptimization,
    cpuMemArena: config.runtime.cpuMemArena,
    memoryPattern: config.runtime.memoryPattern,
    executionMode: config.runtime.executionMode,
    // Later starts open the graphs ONNX Runtime optimised at the first (mod/onnx optimized_cache.ts).
    ...(config.runtime.optimizedCache ? { optimizedCache: config.runtime.optimizedCache } : {}),
  };
  const opened: LoadedModel[] = [];
  const loraFiles = config.lora?.files ?? [];
  const loras = loraFiles.length > 0 ? await LoraSet.load(loraFiles) : undefined;
  const openFor = (target: "unet" | "text_encoder"): SessionOpener =>
    loras ? (p, o) => loras.open(p, target, o, open) : open;
  // The sessions every image runs may keep their working memory between runs (config resolve.ts
  // `imageSessionMemory`): the text encoder, the UNet and the tiny VAE decoder.
  const everyImage: Pick<SessionOptions, "cpuMemArena" | "memoryPattern"> = {
    cpuMemArena: config.runtime.imageSessions.cpuMemArena,
    memoryPattern: config.runtime.imageSessions.memoryPattern,
  };
  const load = async (
    component: Component,
    path: string,
    opener: SessionOpener = open,
    extra: Pick<SessionOptions, "outputLocations" | "cpuMemArena" | "memoryPattern"> = {},
  ): Promise<LoadedModel> => {
    try {
      const stat = await Deno.stat(path);
      if (!stat.isFile) throw new Error("not a file");
    } catch (e) {
      const why = e instanceof Deno.errors.NotFound ? "file not found" : errorMessage(e);
      throw new Error(
        `${path}: ${why} (${component}; run \`deno task models\` to download models)`,
      );
    }
    let session: ModelSession;
    try {
      session = await opener(path, { ...options, ...extra, label: component });
    } catch (e) {
      throw new Error(`${path}: cannot load ${component}: ${errorMessage(e)}`, { cause: e });
    }
    const model: LoadedModel = { path, session, io: undefined as unknown as ResolvedIo };
    opened.push(model);
    try {
      model.io = checkSession(component, session);
    } catch (e) {
      throw new Error(`${path}: ${errorMessage(e)}`, { cause: e });
    }
    if (!device.float16 && [...session.inputs, ...session.outputs].some(isFloat16)) {
      // It would open, then fail its first run: say so now, once.
      throw new ExecutionProviderError(provider, noFloat16Text(), `${path} (${component}, fp16)`);
    }
    return model;
  };

  try {
    const tokenizer = await ClipTokenizer.load(paths.tokenizer).catch((e) => {
      throw new Error(`${paths.tokenizer}: ${errorMessage(e)}`, { cause: e });
    });
    const schedulerConfig = await readJsonObject(paths.schedulerConfig);
    const merged = config.models.merged;
    const unetPath = merged?.unet ?? paths.unet;
    const controlnetUnetPath = merged?.controlnetUnet ?? config.models.controlnetUnet;
    const cn = config.controlnet;
    const guided = cn.depth.enabled || cn.openpose.enabled || cn.inpaint.enabled;
    const consumers: HiddenStatesConsumer[] = [{ component: "unet", path: unetPath }];
    if (guided) {
      consumers.push({ component: "controlnet_unet", path: controlnetUnetPath });
      for (const kind of ["depth", "openpose", "inpaint"] as const) {
        if (cn[kind].enabled) consumers.push({ component: "controlnet", path: cn[kind].model });
      }
    }
    const textEncoderPath = merged?.textEncoder ?? paths.textEncoder;
    const prompt = config.prompt ?? { syntax: "plain", clipSkip: 1 };
    // Embeddings are read under a1111 only: under plain their words are text.
    const embeddings = prompt.syntax !== "a1111" ? [] : prompt.embeddings ??
      (await loadEmbeddings(prompt.embeddingFiles ?? [], tokenizer.vocabSize)).files;
    const textEncoder = await load(
      "text_encoder",
      textEncoderPath,
      await textEncoderOpener(
        { clipSkip: prompt.clipSkip, embeddings },
        open,
        openBytes,
        openCached,
        loras,
      ),
      {
        // AUTOMATIC1111's reading weighs and joins the chunks in JavaScript: its hidden states
        // come to the CPU (then go to the UNet as the "plain" ones do without the plan).
        outputLocations: prompt.syntax === "plain"
          ? await hiddenStatesPlan(provider, textEncoderPath, consumers)
          : undefined,
        ...everyImage,
      },
    );
    const promptReading: PromptReading = {
      syntax: prompt.syntax,
      ...(embeddings.length > 0
        ? {
          embeddings: new PromptEmbeddingIndex(
            tokenizer,
            promptEmbeddings(embeddings, tokenizer.vocabSize),
          ),
        }
        : {}),
    };
    const unet = await load("unet", unetPath, openFor("unet"), everyImage);
    loras?.assertMatched();
    checkUnet(unet, textEncoder);
    if (prompt.syntax === "a1111") checkSequenceAxis(unet);
    const tiny = config.models.vaeDecoder === "tiny";
    if (tiny && !config.models.tinyVaeDecoder) {
      throw new Error('models.vae_decoder is "tiny" but no tiny_vae_decoder path is set');
    }
    const vaeDecoder = tiny
      ? await load("vae_decoder", config.models.tinyVaeDecoder!, open, everyImage)
      : await load("vae_decoder", paths.vaeDecoder);
    const set: ModelSet = {
      provider: device,
      tokenizer,
      promptReading,
      schedulerConfig,
      textEncoder,
      unet,
      vaeDecoder,
      vaeDecoderScale: tiny ? 1 : VAE_SCALING_FACTOR,
      controlnets: {},
    };
    if (cn.inpaint.enabled || config.imageToImage) {
      let graph: VaeEncoderGraph["kind"] = "parameters";
      const opener: SessionOpener = async (path, o) => {
        const opened = await openVaeEncoder(path, o, open, openBytes, openCached);
        graph = opened.graph;
        return opened.session;
      };
      const encoder = await load("vae_encoder", paths.vaeEncoder, opener);
      set.vaeEncoder = { ...encoder, graph };
    }
    if (guided) {
      set.controlnetUnet = await load(
        "controlnet_unet",
        controlnetUnetPath,
        openFor("unet"),
      );
      checkUnet(set.controlnetUnet, textEncoder);
      if (prompt.syntax === "a1111") checkSequenceAxis(set.controlnetUnet);
      for (const kind of ["depth", "openpose", "inpaint"] as const) {
        if (!cn[kind].enabled) continue;
        const model = await load("controlnet", cn[kind].model, open, {
          outputLocations: await residualsPlan(provider, cn[kind].model, set.controlnetUnet.io),
        });
        checkControlNet(model, set.controlnetUnet, textEncoder);
        if (prompt.syntax === "a1111") checkSequenceAxis(model);
        set.controlnets[kind] = {
          path: model.path,
          session: model.session,
          io: model.io,
          conditioningScale: cn[kind].conditioningScale,
        };
      }
    }
    if (cn.depth.enabled) {
      const depth = await load("depth", cn.depth.preprocessor);
      set.depth = { ...depth, inputRange: cn.depth.preprocessorInput };
    }
    if (cn.openpose.enabled) {
      set.poseDetector = await load("pose_detector", cn.openpose.detector);
      set.poseEstimator = await load("pose_estimator", cn.openpose.estimator);
    }
    // What loading left in this isolate's heap must not still be resident at the first image.
    collectGarbage();
    return set;
  } catch (e) {
    await Promise.allSettled(opened.map((m) => m.session.release()));
    throw e;
  }
}

/**
 * Opens a VAE encoder so that it returns its latent distribution's
 * parameters: an export that samples inside the graph (`latent_sample` drawn
 * by a random node: the diffusers script, Optimum ≤ 1.22) is rewritten in
 * memory (`mod/onnx` `exposeLatentParameters`) and opened from bytes; one
 * that already returns `latent_parameters` (Optimum ≥ 1.23), or a
 * `latent_sample` no random node draws, is opened from its path.
 */
export async function openVaeEncoder(
  path: string,
  options: SessionOptions,
  open: SessionOpener = defaultOpener,
  openBytes: BytesOpener = defaultBytesOpener,
  openCached: RewriteCacheOpener = defaultRewriteCacheOpener,
): Promise<{ session: ModelSession; graph: VaeEncoderGraph["kind"] }> {
  // Only a rewritten graph is cached under the rewrite's name: one found means the file was
  // rewritten at an earlier start, and reading and rewriting it again (0.9 s of a start on a
  // 2-core x86-64 VM for the 130 MB full-size encoder) would give the same bytes.
  const cached = await openCached({ path, rewrite: LATENT_PARAMETERS_REWRITE }, options);
  let found: Extract<VaeEncoderGraph, { kind: "rewritten" }> | undefined;
  let session: ModelSession;
  if (cached) session = cached;
  else {
    const graph = exposeLatentParameters(await Deno.readFile(path));
    if (graph.kind !== "rewritten") {
      return { session: await open(path, options), graph: graph.kind };
    }
    found = graph;
    const externalData: ExternalDataFile[] = [];
    for (const ref of (await readModelInfo(path)).externalData) {
      externalData.push({
        path: ref.location,
        data: await Deno.readFile(join(dirname(path), ref.location)),
      });
    }
    session = await openBytes(
      { path, bytes: found.model, externalData, rewrite: LATENT_PARAMETERS_REWRITE },
      options,
    );
  }
  if (!session.outputs.some((o) => o.name === LATENT_PARAMETERS)) {
    await session.release();
    throw new Error(
      `the rewritten graph was not what was opened (outputs: ${
        session.outputs.map((o) => o.name).join(", ")
      }); a custom session opener must open the bytes it is given`,
    );
  }
  if (!found) {
    log(
      "info",
      "pipeline",
      "vae_encoder: its rewritten graph (returning its parameters) from the cache",
      {
        model: path,
      },
    );
    return { session, graph: "rewritten" };
  }
  log("info", "pipeline", "vae_encoder samples in the graph; rewritten to return its parameters", {
    model: path,
    removed: `${found.random.op} node ${found.random.name}`,
    parameters: found.parameters,
    chunk: found.chunk,
    removedNodes: found.removedNodes,
  });
  return { session, graph: "rewritten" };
}

function isFloat16(port: { dtype: string }): boolean {
  return port.dtype === "float16";
}

/** Releases every session of a model set. */
export async function releaseModels(set: ModelSet): Promise<void> {
  const models = [
    set.textEncoder,
    set.unet,
    set.vaeDecoder,
    set.vaeEncoder,
    set.controlnetUnet,
    ...Object.values(set.controlnets),
    set.depth,
    set.poseDetector,
    set.poseEstimator,
  ];
  await Promise.allSettled(models.map((m) => m?.session.release()));
}

/** Checks what the contract leaves to the pipeline: 4 latent channels, matching text widths. */
function checkUnet(unet: LoadedModel, textEncoder: LoadedModel): void {
  const io = unet.io;
  if (typeof io.sampleChannels === "number" && io.sampleChannels !== 4) {
    throw new Error(
      `${unet.path}: ${io.component} input \`sample\` has ${io.sampleChannels} channels; this ` +
        `server drives a standard 4-channel SD 1.5 UNet (inpainting uses the inpaint ControlNet, ` +
        `not a 9-channel inpainting UNet)`,
    );
  }
  sameHidden(unet, textEncoder);
  const cond = io.inputs.timestep_cond;
  if (cond && typeof cond.shape[1] !== "number") {
    throw new Error(
      `${unet.path}: ${io.component} input \`${cond.name}\` must have a fixed width (dim 1), ` +
        `got [${cond.shape.join(",")}]`,
    );
  }
}

/**
 * Under `[prompt] syntax = "a1111"` a prompt of k chunks reaches the UNet as
 * 77·k positions: a model whose `encoder_hidden_states` fixes its sequence
 * (some static-shape exports) could only run prompts of one chunk, so it is
 * refused at start-up, naming the way out. The diffusers script and Optimum
 * exports declare the axis symbolic (`sequence`, `sequence_length`).
 */
export function checkSequenceAxis(model: Pick<LoadedModel, "path" | "io">): void {
  const port = model.io.inputs.encoder_hidden_states;
  const length = port?.shape[1];
  if (typeof length === "number") {
    throw new Error(
      `${model.path}: ${model.io.component} input \`${port.name}\` has a fixed sequence length ` +
        `${length}; [prompt] syntax = "a1111" feeds 77 positions per 75-token chunk and needs a ` +
        `symbolic one: set [prompt] syntax = "plain" (prompts cut at 77 tokens) or use an export ` +
        `with a dynamic sequence axis`,
    );
  }
}

function checkControlNet(model: LoadedModel, unet: LoadedModel, textEncoder: LoadedModel): void {
  sameHidden(model, textEncoder);
  try {
    assertResidualsMatch(model.io, unet.io);
  } catch (e) {
    throw new Error(`${model.path} and ${unet.path}: ${errorMessage(e)}`);
  }
}

function sameHidden(model: LoadedModel, textEncoder: LoadedModel): void {
  const a = textEncoder.io.hiddenSize;
  const b = model.io.hiddenSize;
  if (typeof a === "number" && typeof b === "number" && a !== b) {
    throw new Error(
      `${model.path}: ${model.io.component} input \`encoder_hidden_states\` expects width ${b}, ` +
        `but the text encoder (${textEncoder.path}) produces ${a}`,
    );
  }
}
