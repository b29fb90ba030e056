/**
 * Raw config in, resolved config out, once. Paths become absolute, secrets
 * are read from the environment, cross-key rules are checked; nothing
 * downstream re-checks any of it.
 *
 * This file holds the shape of the resolved config and composes it; its
 * parts live beside it: `server.ts` (transport, HTTP limits, API keys,
 * backend), `presets.ts` (sampling presets), `models.ts` (`base = "auto"`),
 * `prompt.ts` (prompt syntax, embeddings, LoRA files).
 *
 * @module
 */

import { dirname, isAbsolute, join, resolve } from "node:path";
import type { AddressRange } from "../http/client_address.ts";
import type { SizeId } from "../pipeline/types.ts";
import type { SchedulerName } from "../schedulers/mod.ts";
import { ConfigError } from "./error.ts";
import { AUTO_FOLDER, autoBase } from "./models.ts";
import { choosePreset, type PresetName, sessionMemory } from "./presets.ts";
import { type PromptSyntax, resolveEmbeddings, resolveLoraFiles } from "./prompt.ts";
import type { RawConfig } from "./schema.ts";
import { resolveServer } from "./server.ts";

/** The scheduler names accepted by `generation.scheduler`. */
export type { SchedulerName } from "../schedulers/mod.ts";

/** One ControlNet's resolved settings. */
export interface ControlNetConfig {
  /** Whether requests for it are served. */
  enabled: boolean;
  /** Absolute path of the ControlNet ONNX file. */
  model: string;
  /** ControlNet strength applied to every residual. */
  conditioningScale: number;
}

/** Configuration after validation and resolution; every path is absolute. */
export interface ResolvedConfig {
  /** The config file it came from, or null when defaults were used. */
  file: string | null;
  /** `[server]`: transport, listen address, allowed origins, shutdown grace and the data folder. */
  server: {
    transport: "stdio" | "http";
    host: string;
    port: number;
    /** From `[server] environment`, overridden by `MCP_ENV`. */
    environment: string;
    allowedOrigins: string[];
    shutdownGraceMs: number;
    dataDir: string;
    /** Slow-client limits of the HTTP port (mod/http/connection_guard.ts). */
    headerTimeoutMs: number;
    bodyMinBytesPerSecond: number;
    idleTimeoutMs: number;
    maxConnections: number;
    /** Most open connections of one client (IPv4 address, IPv6 /64, or proxy-named client). */
    maxConnectionsPerClient: number;
    /** New connections one client may open per second (bursts of twice that). */
    clientConnectionsPerSecond: number;
    /** Most connections waiting for their request head; one more closes the oldest. */
    maxPendingHeads: number;
    /** `trusted_proxies`: peers whose `forwardedHeader` names the client (empty: none). */
    trustedProxies: AddressRange[];
    /** The header trusted proxies name the client in. */
    forwardedHeader: "x-forwarded-for" | "forwarded";
    /** Most requests of one API key in flight at once. */
    maxRequestsPerKey: number;
    /**
     * `all`: serves MCP and runs jobs; `front`: serves MCP, no engine (jobs run
     * on other replicas); `worker`: runs jobs, serves only `/healthz`.
     */
    role: "all" | "front" | "worker";
  };
  /** `[auth]` plus `DATABASE_URL` / `CLOUDFRONT_SECRET_HEADER`: API-key checking for the HTTP transport. */
  auth: {
    cacheTtlMs: number;
    dbTimeoutMs: number;
    lastUsedIntervalMs: number;
    /** Most scrypt runs at once. */
    scryptConcurrency: number;
    /** Prefixes that may wait for a scrypt run before 503 with Retry-After. */
    verifyQueueLimit: number;
    /** Wrong secrets per prefix per minute before 401 without scrypt. */
    failuresPerMinute: number;
    /** How long an unknown key prefix is answered from memory, in ms. */
    unknownPrefixCacheMs: number;
    /** `DATABASE_URL`; undefined = embedded PostgreSQL in `dataDir`. */
    databaseUrl?: string;
    /** `CLOUDFRONT_SECRET_HEADER`; required in HTTP mode unless the environment is `local`. */
    cloudfrontSecret?: string;
  };
  /** Present only when `BACKEND_INTERNAL_URL` is set: enables the design-code tools. */
  backend?: { url: string; apiKey?: string; timeoutMs: number; maxResponseBytes: number };
  /** Where the model files are (all absolute). */
  models: {
    /** Folder holding every model file; `models.lock` paths are relative to it. */
    root: string;
    /** Absolute path of models.lock. */
    lock: string;
    /** Absolute SD 1.5 folder (diffusers ONNX layout). */
    base: string;
    /**
     * What `base = "auto"` picked ({@link AUTO_BASE}): the pinned fp32 export
     * ("fp32"), the fp32 set derived here from the fp16 one ("fp32-derived"), or
     * the fp16 set ("fp16"); null when a folder was named.
     */
    autoBase: "fp32" | "fp32-derived" | "fp16" | null;
    /** Absolute path of the UNet that accepts ControlNet residuals. */
    controlnetUnet: string;
    /** `vae_decoder`: the base folder's VAE decoder ("full") or the tiny one (TAESD). */
    vaeDecoder: "full" | "tiny";
    /** Absolute path of the tiny VAE decoder (used when `vaeDecoder` is "tiny"). */
    tinyVaeDecoder: string;
    /**
     * `vae`: absolute folder of a VAE set (`vae_decoder/model.onnx`,
     * `vae_encoder/model.onnx`, as `deno task models add --component vae`
     * writes it) used instead of the base set's VAE for decoding and
     * encoding; null = the base set's own.
     */
    vae: string | null;
    /** Absolute path of the LCM LoRA blended in by `[generation] preset = "fast"`. */
    lcmLora: string;
    /** Absolute path of the Hyper-SD LoRA blended in by `[generation] preset = "turbo"`. */
    turboLora: string;
  };
  /** `[runtime]`: onnxruntime execution provider, thread counts and graph optimization level. */
  runtime: {
    executionProvider: "cpu" | "cuda" | "webgpu";
    intraOpThreads: number;
    interOpThreads: number;
    graphOptimization: "disabled" | "basic" | "extended" | "all";
    /**
     * `cpu_mem_arena`: ORT's CPU memory arena for every session but the ones
     * each image runs (the VAE encoder, a full VAE decoder, ControlNets,
     * preprocessors); off keeps RSS near the weights (docs/performance.md).
     */
    cpuMemArena: boolean;
    /** `memory_pattern`: ORT's memory pattern planning for those sessions. */
    memoryPattern: boolean;
    /**
     * The same two for the sessions every image runs: the text encoder, the
     * UNet and the tiny VAE decoder (`cpu_mem_arena = "auto"`: kept under the
     * fast and turbo presets, see {@link imageSessionMemory}).
     */
    imageSessions: { cpuMemArena: boolean; memoryPattern: boolean };
    /** `execution_mode`: ORT's node scheduling. */
    executionMode: "sequential" | "parallel";
    /**
     * `optimized_cache`: the folder where ORT's optimised graphs are kept for
     * later starts (`<models root>/.optimized`), or null when it is off.
     */
    optimizedCache: string | null;
    /**
     * `warm_up`: one image of one step at the default size before the engine
     * reports ready; "auto" resolves to true for few-step sampling (at most
     * {@link WARM_UP_AUTO_STEPS} steps), where a first run's cost is a large
     * share of an image.
     */
    warmUp: boolean;
  };
  /** `[generation]`: defaults and limits for each image (size, steps, CFG, scheduler, seed, counts). */
  generation: {
    defaultSize: SizeId;
    steps: number;
    guidanceScale: number;
    scheduler: SchedulerName;
    timestepSpacing?: "leading" | "trailing" | "linspace";
    karras: boolean;
    /** η of ddim and tcd (TCD's γ): `[generation] eta`, else the preset's. */
    eta: number;
    /** Fixed seed, or null for a random seed per image. */
    seed: number | null;
    maxCount: number;
    queueLimit: number;
    /**
     * Slots of the queue one API key, and one project's keys together, may
     * hold before the last slots are kept for others (HTTP only;
     * mod/jobs/queue_full.ts). Infinity where the setting is 0 (no share).
     */
    queueShare: { perKey: number; perProject: number };
    /**
     * The preset that decided the sampling, already applied to `steps`,
     * `guidanceScale`, `scheduler`, `eta`, `models.vaeDecoder` (and, for
     * "fast" and "turbo", their LoRA appended to `lora.files`): "auto"
     * resolved by the execution provider, "default" read as "custom".
     */
    preset: PresetName;
    /** Whether `preset` came from `preset = "auto"` (by provider) or was named in the config. */
    presetSource: "auto" | "config";
    /** How long a call waits for its images, in ms; Infinity = until done (`max_wait_seconds = 0`). */
    maxWaitMs: number;
  };
  /**
   * `[prompt]`: base prompts joined with every request's prompts (contract
   * §2), how prompts are read, which text-encoder layer conditions, and the
   * embeddings.
   */
  prompt: {
    positive: string;
    negative: string;
    /**
     * "a1111": AUTOMATIC1111's prompt syntax (emphasis, `BREAK`, 75-token
     * chunks, nothing cut); "plain": the text as is, cut at 77 tokens.
     */
    syntax: PromptSyntax;
    /**
     * AUTOMATIC1111's CLIP skip: 1 = the last layer's hidden state, n = the
     * state n − 1 layers earlier, through the final layer norm (diffusers'
     * `clip_skip = n − 1`).
     */
    clipSkip: number;
    /**
     * `embeddings`: textual-inversion embedding files (absolute, under the models root), each
     * with the word that calls it (the configured name, else the file's stem), in config order.
     */
    embeddings: { path: string; name: string }[];
  };
  /** `[controlnet]`: the depth, openpose and inpaint ControlNets (model, annotators, scale). */
  controlnet: {
    depth: ControlNetConfig & {
      preprocessor: string;
      /** Pixel range the depth model expects: `unit` [0, 1], `signed` [-1, 1]. */
      preprocessorInput: "unit" | "signed";
    };
    openpose: ControlNetConfig & { detector: string; estimator: string };
    inpaint: ControlNetConfig;
  };
  /** LoRAs blended into the UNet(s) and text encoder at start-up, in config order. */
  lora: {
    /** Absolute `.safetensors` paths (under the models root) and their weights. */
    files: { path: string; weight: number }[];
  };
  /**
   * `[transform]`: the image-to-image strength (diffusers `strength`: the
   * share of the denoising schedule re-run from the image) of each
   * `transform_image` `change`, subtle ≤ moderate ≤ strong.
   */
  transform: { subtle: number; moderate: number; strong: number };
  /** `[upscale]`: the strength of `upscale_image`'s tiled refinement. */
  upscale: { strength: number };
  /** `[output]`: whether each PNG is also written to disk, and the absolute folder. */
  output: { save: boolean; dir: string };
  /** `[jobs]`: how long finished results are kept, the cap on their total size, the claim lease. */
  jobs: {
    resultTtlMs: number;
    maxResultBytes: number;
    leaseMs: number;
    /**
     * What one API key, and all keys of one project, may have queued or
     * running at once, and the results one key keeps (HTTP only: over stdio
     * there is one owner, bound by `queue_limit` and `max_result_mib`).
     * Infinity where the setting is 0 (no limit).
     */
    perKey: { jobs: number; images: number; resultBytes: number };
    /** The same for all keys bound to one project (unbound keys have no project). */
    perProject: { jobs: number; images: number };
  };
}

/** `warm_up = "auto"` warms up sampling of at most this many steps (the fast and one-step presets). */
export const WARM_UP_AUTO_STEPS = 8;

/** The folder of ONNX Runtime's optimised graphs under the models root (`[runtime] optimized_cache`). */
export const OPTIMIZED_DIR = ".optimized";

/**
 * Turns a validated raw config into the resolved one.
 *
 * @param raw validated raw config
 * @param file the config file (paths are relative to its folder), or null
 * @param env environment variables to read secrets from
 * @param cwd folder used for relative paths when there is no file
 * @param exists whether a file exists (for `[models] base = "auto"`); default: never
 */
export function resolveConfig(
  raw: RawConfig,
  file: string | null,
  env: Record<string, string | undefined>,
  cwd: string,
  exists: (path: string) => boolean = () => false,
): ResolvedConfig {
  const base = file ? dirname(file) : cwd;
  const where = file ?? "defaults";
  const abs = (p: string, from = base) => isAbsolute(p) ? p : resolve(from, p);
  const root = abs(raw.models.root);
  const auto = autoBase(raw.models.base, raw.runtime.execution_provider, root, exists);
  const { server, auth, backend } = resolveServer(raw, env, where, abs);

  const t = raw.transform;
  if (!(t.subtle <= t.moderate && t.moderate <= t.strong)) {
    throw new ConfigError(
      `${where}: [transform] must keep subtle <= moderate <= strong, got subtle = ${t.subtle}, ` +
        `moderate = ${t.moderate}, strong = ${t.strong}`,
    );
  }

  const cn = raw.controlnet;
  const g = raw.generation;
  const { preset, presetSource, values } = choosePreset(raw, where);
  const presetLora = values.lora;
  const presetLoraPath = presetLora ? abs(raw.models[presetLora.key], root) : undefined;
  return {
    file,
    server,
    auth,
    backend,
    models: {
      root,
      lock: abs(raw.models.lock),
      base: abs(auto ? AUTO_FOLDER[auto] : raw.models.base, root),
      autoBase: auto,
      controlnetUnet: abs(raw.models.controlnet_unet, root),
      // A VAE the user chose decodes too: the preset's tiny decoder only when written.
      vaeDecoder: raw.models.vae_decoder ?? (raw.models.vae ? "full" : values.vaeDecoder),
      tinyVaeDecoder: abs(raw.models.tiny_vae_decoder, root),
      vae: raw.models.vae ? abs(raw.models.vae, root) : null,
      lcmLora: abs(raw.models.lcm_lora, root),
      turboLora: abs(raw.models.turbo_lora, root),
    },
    runtime: {
      executionProvider: raw.runtime.execution_provider,
      intraOpThreads: raw.runtime.intra_op_threads,
      interOpThreads: raw.runtime.inter_op_threads,
      graphOptimization: raw.runtime.graph_optimization,
      ...sessionMemory(raw.runtime.cpu_mem_arena, raw.runtime.memory_pattern, preset),
      executionMode: raw.runtime.execution_mode,
      optimizedCache: raw.runtime.optimized_cache ? join(root, OPTIMIZED_DIR) : null,
      warmUp: raw.runtime.warm_up === "auto"
        ? (g.steps ?? values.steps) <= WARM_UP_AUTO_STEPS
        : raw.runtime.warm_up,
    },
    generation: {
      defaultSize: raw.generation.default_size,
      steps: g.steps ?? values.steps,
      guidanceScale: g.guidance_scale ?? values.guidanceScale,
      scheduler: g.scheduler ?? values.scheduler,
      timestepSpacing: raw.generation.timestep_spacing === "auto"
        ? undefined
        : raw.generation.timestep_spacing,
      karras: raw.generation.karras,
      eta: g.eta ?? values.eta,
      seed: raw.generation.seed < 0 ? null : raw.generation.seed,
      maxCount: raw.generation.max_count,
      queueLimit: raw.generation.queue_limit,
      queueShare: {
        perKey: unlimitedIfZero(raw.generation.queue_share_per_key),
        perProject: unlimitedIfZero(raw.generation.queue_share_per_project),
      },
      preset,
      presetSource,
      maxWaitMs: raw.generation.max_wait_seconds === 0
        ? Infinity
        : raw.generation.max_wait_seconds * 1000,
    },
    prompt: {
      positive: raw.prompt.positive,
      negative: raw.prompt.negative,
      syntax: raw.prompt.syntax,
      clipSkip: raw.prompt.clip_skip,
      embeddings: resolveEmbeddings(raw.prompt.embeddings, root, where),
    },
    controlnet: {
      depth: {
        enabled: cn.depth.enabled,
        model: abs(cn.depth.model, root),
        preprocessor: abs(cn.depth.preprocessor, root),
        preprocessorInput: cn.depth.preprocessor_input,
        conditioningScale: cn.depth.conditioning_scale,
      },
      openpose: {
        enabled: cn.openpose.enabled,
        model: abs(cn.openpose.model, root),
        detector: abs(cn.openpose.detector, root),
        estimator: abs(cn.openpose.estimator, root),
        conditioningScale: cn.openpose.conditioning_scale,
      },
      inpaint: {
        enabled: cn.inpaint.enabled,
        model: abs(cn.inpaint.model, root),
        conditioningScale: cn.inpaint.conditioning_scale,
      },
    },
    lora: {
      files: resolveLoraFiles(raw.lora.files, root, presetLoraPath),
    },
    transform: { subtle: t.subtle, moderate: t.moderate, strong: t.strong },
    upscale: { strength: raw.upscale.strength },
    output: { save: raw.output.save, dir: abs(raw.output.dir) },
    jobs: {
      resultTtlMs: raw.jobs.result_ttl_seconds * 1000,
      maxResultBytes: Math.round(raw.jobs.max_result_mib * 1024 * 1024),
      leaseMs: raw.jobs.lease_seconds * 1000,
      perKey: {
        jobs: unlimitedIfZero(raw.jobs.max_jobs_per_key),
        images: unlimitedIfZero(raw.jobs.max_images_per_key),
        resultBytes: unlimitedIfZero(Math.round(raw.jobs.max_result_mib_per_key * 1024 * 1024)),
      },
      perProject: {
        jobs: unlimitedIfZero(raw.jobs.max_jobs_per_project),
        images: unlimitedIfZero(raw.jobs.max_images_per_project),
      },
    },
  };
}

/** A limit where 0 means none. */
function unlimitedIfZero(n: number): number {
  return n === 0 ? Infinity : n;
}
