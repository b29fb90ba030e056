/**
 * The shape of the resolved configuration: what `resolveConfig` (resolve.ts)
 * returns and every part of the resolution (server.ts, presets.ts, models.ts,
 * prompt.ts) fills in. Every path in it is absolute and every value checked:
 * nothing downstream checks the config again.
 *
 * @module
 */

import type { AddressRange } from "../http/client_address.ts";
import type { SizeId } from "../pipeline/types.ts";
import type { PromptSyntax } from "./prompt.ts";

/** A resolved `[generation] preset`. */
export type PresetName = "fast" | "turbo" | "quality" | "custom";

/** The scheduler names accepted by `generation.scheduler`. */
export type { SchedulerName } from "../schedulers/mod.ts";
import type { SchedulerName } from "../schedulers/mod.ts";

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
