/**
 * Raw config in, resolved config out, once. Paths become absolute, secrets
 * are read from the environment, cross-key rules are checked; nothing
 * downstream re-checks any of it.
 *
 * @module
 */

import { dirname, isAbsolute, join, resolve } from "node:path";
import { type AddressRange, parseAddressRange } from "../http/client_address.ts";
import type { SizeId } from "../pipeline/types.ts";
import type { SchedulerName } from "../schedulers/mod.ts";
import type { RawConfig } from "./schema.ts";

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

/** A resolved `[generation] preset`. */
export type PresetName = "fast" | "turbo" | "quality" | "custom";

/** How prompts are read (`[prompt] syntax`). */
export type PromptSyntax = "a1111" | "plain";

/** What a preset sets; the keys written in the config win over it. */
export interface PresetValues {
  /** Denoising steps. */
  steps: number;
  /** Classifier-free guidance scale (≤ 1: no unconditional pass). */
  guidanceScale: number;
  /** Scheduler name. */
  scheduler: SchedulerName;
  /** η of ddim and tcd (0 for the schedulers that have none). */
  eta: number;
  /** The VAE decoder: the base set's ("full") or TAESD ("tiny"). */
  vaeDecoder: "full" | "tiny";
  /**
   * The distillation LoRA merged in, and the only scheduler it samples with:
   * the LCM LoRA (`[models] lcm_lora`) or Hyper-SD's (`[models] turbo_lora`).
   */
  lora: { key: "lcm_lora" | "turbo_lora"; scheduler: SchedulerName } | null;
}

/**
 * The presets. "fast": LCM-LoRA sampling as diffusers' LCM-LoRA guide runs it
 * (`LCMScheduler`, 4 steps, guidance_scale 1.0, so no unconditional batch)
 * with the tiny VAE decoder: 17–30 s per 512² image on 2 CPU cores.
 * "turbo": ByteDance's Hyper-SD unified 1-step LoRA as its publisher runs it
 * (`TCDScheduler`, 1 step, guidance_scale 0, eta 1.0) with the tiny VAE
 * decoder: one UNet call instead of four, less detail and prompt adherence.
 * "quality": SD 1.5's own sampling (PNDM, 25 steps, CFG 7.5, the full VAE):
 * 4–7 minutes on 2 CPU cores, seconds on a GPU. "custom" (also the old
 * "default"): the keys as written, with quality's values for those left out.
 * docs/performance.md measures each; README "Presets" compares them.
 */
export const PRESETS: Readonly<Record<PresetName, PresetValues>> = {
  fast: {
    steps: 4,
    guidanceScale: 1,
    scheduler: "lcm",
    eta: 0,
    vaeDecoder: "tiny",
    lora: { key: "lcm_lora", scheduler: "lcm" },
  },
  turbo: {
    steps: 1,
    guidanceScale: 0,
    scheduler: "tcd",
    eta: 1,
    vaeDecoder: "tiny",
    lora: { key: "turbo_lora", scheduler: "tcd" },
  },
  quality: {
    steps: 25,
    guidanceScale: 7.5,
    scheduler: "pndm",
    eta: 0,
    vaeDecoder: "full",
    lora: null,
  },
  custom: {
    steps: 25,
    guidanceScale: 7.5,
    scheduler: "pndm",
    eta: 0,
    vaeDecoder: "full",
    lora: null,
  },
};

/** What ran: the preset and the sampling it resolved to (PNG metadata, result texts, `/healthz`). */
export interface SamplingSummary {
  /** The resolved preset. */
  preset: PresetName;
  /** "auto" when `preset = "auto"` chose it by execution provider. */
  chosenBy: "auto" | "config";
  /** Denoising steps. */
  steps: number;
  /** Scheduler name. */
  scheduler: SchedulerName;
  /** Classifier-free guidance scale (≤ 1: no unconditional pass). */
  guidanceScale: number;
  /** η, only for the schedulers that read it (ddim, tcd). */
  eta?: number;
  /** The VAE decoder: the base set's ("full") or TAESD ("tiny"). */
  vaeDecoder: "full" | "tiny";
}

/** The {@link SamplingSummary} of a resolved config. */
export function samplingSummary(
  config: Pick<ResolvedConfig, "generation" | "models">,
): SamplingSummary {
  const g = config.generation;
  return {
    preset: g.preset,
    chosenBy: g.presetSource,
    steps: g.steps,
    scheduler: g.scheduler,
    guidanceScale: g.guidanceScale,
    ...(g.scheduler === "ddim" || g.scheduler === "tcd" ? { eta: g.eta } : {}),
    vaeDecoder: config.models.vaeDecoder,
  };
}

/**
 * One line for people and models: `fast preset (lcm, 4 steps, guidance 1, tiny VAE)`,
 * `turbo preset (tcd, 1 step, eta 1, guidance 0, tiny VAE)`.
 */
export function samplingText(s: SamplingSummary): string {
  const eta = s.eta === undefined ? "" : `, eta ${s.eta}`;
  return `${s.preset} preset (${s.scheduler}, ${s.steps} step${s.steps === 1 ? "" : "s"}${eta}, ` +
    `guidance ${s.guidanceScale}, ${s.vaeDecoder} VAE)`;
}

/**
 * `cpu_mem_arena = "auto"`: whether the sessions every image runs keep their
 * working memory between runs under a preset. Kept under `fast` and `turbo`:
 * with it given back after each run, an image asked after the server idled
 * 20 s took 1.5× a steady one (turbo) on a 2-core Firecracker VM, whose
 * memory freed and asked for again after an idle period is backed anew,
 * against 1.04–1.06× when it is kept, for the same steady images and peak
 * RSS (the UNet's working memory is the peak either way) and 1.3 GB more
 * held while idle (docs/performance.md, "Warm starts"). Not under `quality`
 * and `custom`: CFG doubles the UNet's batch and the full VAE decoder's
 * working memory at 512² is larger than the UNet's, so keeping them raises
 * the peak.
 */
export function imageSessionMemory(preset: PresetName): boolean {
  return preset === "fast" || preset === "turbo";
}

/**
 * The arena and memory-pattern settings per kind of session. A value written
 * in the config applies to every session; "auto" keeps the arena only for the
 * sessions every image runs, under the presets {@link imageSessionMemory}
 * names, and plans a memory pattern only where the arena is off: with both
 * on, a session's second run asks the arena for its planned block on top of
 * the first run's chunks (the full-size UNet held 2.3 GB, against 1.1 GB with
 * the pattern off).
 */
function sessionMemory(
  arena: boolean | "auto",
  pattern: boolean | "auto",
  preset: PresetName,
): Pick<ResolvedConfig["runtime"], "cpuMemArena" | "memoryPattern" | "imageSessions"> {
  const of = (keep: boolean) => {
    const cpuMemArena = arena === "auto" ? keep : arena;
    return { cpuMemArena, memoryPattern: pattern === "auto" ? !cpuMemArena : pattern };
  };
  return { ...of(false), imageSessions: of(imageSessionMemory(preset)) };
}

/** `warm_up = "auto"` warms up sampling of at most this many steps (the fast and one-step presets). */
export const WARM_UP_AUTO_STEPS = 8;

/** The folder of ONNX Runtime's optimised graphs under the models root (`[runtime] optimized_cache`). */
export const OPTIMIZED_DIR = ".optimized";

/** `preset = "auto"`: fast on the CPU provider, quality on GPU providers. */
export function autoPreset(provider: "cpu" | "cuda" | "webgpu"): "fast" | "quality" {
  return provider === "cpu" ? "fast" : "quality";
}

/** A config problem: names the file and the key. */
export class ConfigError extends Error {
  /** Creates an error whose message already names file and key. */
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}

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
  const nonEmpty = (v: string | undefined) => v === undefined || v === "" ? undefined : v;

  const environment = nonEmpty(env.MCP_ENV) ?? raw.server.environment;
  const cloudfrontSecret = nonEmpty(env.CLOUDFRONT_SECRET_HEADER);
  if (raw.server.transport === "http" && environment !== "local" && !cloudfrontSecret) {
    throw new ConfigError(
      `${where}: server.environment is "${environment}" but CLOUDFRONT_SECRET_HEADER is not set; ` +
        `set it (X-MCP-Token is required outside "local"), or set MCP_ENV=local for local use`,
    );
  }

  if (raw.server.role !== "all") {
    if (raw.server.transport !== "http") {
      throw new ConfigError(
        `${where}: server.role = "${raw.server.role}" needs server.transport = "http", got "${raw.server.transport}"`,
      );
    }
    if (!nonEmpty(env.DATABASE_URL)) {
      throw new ConfigError(
        `${where}: server.role = "${raw.server.role}" needs DATABASE_URL: fronts and workers share ` +
          `the job queue through a PostgreSQL server (the embedded database serves one replica)`,
      );
    }
  }

  const trustedProxies = raw.server.trusted_proxies.map((entry, i) => {
    try {
      return parseAddressRange(entry);
    } catch (error) {
      throw new ConfigError(
        `${where}: server.trusted_proxies[${i}]: ${(error as Error).message} ` +
          `(write an address such as "10.0.0.7" or a range such as "10.0.0.0/8")`,
      );
    }
  });

  let backend: ResolvedConfig["backend"];
  const backendUrl = nonEmpty(env.BACKEND_INTERNAL_URL);
  if (backendUrl) {
    let parsed: URL;
    try {
      parsed = new URL(backendUrl);
    } catch {
      throw new ConfigError(`BACKEND_INTERNAL_URL is not a valid URL: "${backendUrl}"`);
    }
    if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
      throw new ConfigError(`BACKEND_INTERNAL_URL must be http(s), got "${parsed.protocol}"`);
    }
    backend = {
      url: backendUrl.replace(/\/+$/, ""),
      apiKey: nonEmpty(env.BACKEND_INTERNAL_API_KEY),
      timeoutMs: raw.backend.timeout_ms,
      maxResponseBytes: raw.backend.max_response_bytes,
    };
  }

  const t = raw.transform;
  if (!(t.subtle <= t.moderate && t.moderate <= t.strong)) {
    throw new ConfigError(
      `${where}: [transform] must keep subtle <= moderate <= strong, got subtle = ${t.subtle}, ` +
        `moderate = ${t.moderate}, strong = ${t.strong}`,
    );
  }

  const cn = raw.controlnet;
  const g = raw.generation;
  const presetSource = g.preset === "auto" ? "auto" : "config";
  const preset: PresetName = g.preset === "auto"
    ? autoPreset(raw.runtime.execution_provider)
    : g.preset === "default"
    ? "custom"
    : g.preset;
  const values = PRESETS[preset];
  const presetLora = values.lora;
  if (presetLora && g.scheduler !== undefined && g.scheduler !== presetLora.scheduler) {
    const which = presetLora.key === "lcm_lora" ? "LCM LoRA" : "Hyper-SD LoRA";
    throw new ConfigError(
      `${where}: generation.scheduler = "${g.scheduler}" does not go with the ${preset} preset ` +
        `(generation.preset = "${g.preset}"${
          presetSource === "auto"
            ? `, ${preset} on the ${raw.runtime.execution_provider} provider`
            : ""
        }): its ${which} samples with the ${presetLora.scheduler} scheduler. Remove scheduler ` +
        `(and steps, guidance_scale) to run the ${preset} preset, or set generation.preset = ` +
        `"quality" or "custom"`,
    );
  }
  const presetLoraPath = presetLora ? abs(raw.models[presetLora.key], root) : undefined;
  return {
    file,
    server: {
      transport: raw.server.transport,
      host: raw.server.host,
      port: raw.server.port,
      environment,
      allowedOrigins: raw.server.allowed_origins.map((o) => new URL(o).origin),
      shutdownGraceMs: raw.server.shutdown_grace_seconds * 1000,
      dataDir: abs(raw.server.data_dir),
      headerTimeoutMs: raw.server.header_timeout_seconds * 1000,
      bodyMinBytesPerSecond: raw.server.body_min_bytes_per_second,
      idleTimeoutMs: raw.server.idle_timeout_seconds * 1000,
      maxConnections: raw.server.max_connections,
      // Shares of max_connections: a smaller max_connections lowers them with it.
      maxConnectionsPerClient: Math.min(
        raw.server.max_connections_per_client,
        raw.server.max_connections,
      ),
      clientConnectionsPerSecond: raw.server.client_connections_per_second,
      maxPendingHeads: Math.min(raw.server.max_pending_heads, raw.server.max_connections),
      trustedProxies,
      forwardedHeader: raw.server.forwarded_header,
      maxRequestsPerKey: raw.server.max_requests_per_key,
      role: raw.server.role,
    },
    auth: {
      cacheTtlMs: raw.auth.cache_seconds * 1000,
      dbTimeoutMs: raw.auth.db_timeout_ms,
      lastUsedIntervalMs: raw.auth.last_used_interval_seconds * 1000,
      scryptConcurrency: raw.auth.scrypt_concurrency,
      verifyQueueLimit: raw.auth.verify_queue_limit,
      failuresPerMinute: raw.auth.failures_per_minute,
      unknownPrefixCacheMs: raw.auth.unknown_prefix_cache_ms,
      databaseUrl: nonEmpty(env.DATABASE_URL),
      cloudfrontSecret,
    },
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
      files: [
        ...raw.lora.files.map((f) => ({ path: abs(f.path, root), weight: f.weight })),
        ...(presetLoraPath ? [{ path: presetLoraPath, weight: 1 }] : []),
      ],
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

/**
 * `[prompt] embeddings`: absolute paths and the word of each (the name, else the file's stem, as
 * AUTOMATIC1111 names an embedding); two embeddings called by the same word are an error.
 */
function resolveEmbeddings(
  entries: RawConfig["prompt"]["embeddings"],
  root: string,
  where: string,
): { path: string; name: string }[] {
  const out: { path: string; name: string }[] = [];
  for (const entry of entries) {
    const { path, name } = typeof entry === "string" ? { path: entry, name: undefined } : entry;
    const file = path.split(/[\\/]/).pop()!;
    const word = name ?? file.slice(0, file.lastIndexOf("."));
    const other = out.find((e) => e.name === word);
    if (other !== undefined) {
      throw new ConfigError(
        `${where}: [prompt] embeddings calls two files "${word}" (${other.path} and ${path}); ` +
          `give one of them another name: { path = ${JSON.stringify(path)}, name = "…" }`,
      );
    }
    out.push({ path: isAbsolute(path) ? path : resolve(root, path), name: word });
  }
  return out;
}

/** A limit where 0 means none. */
function unlimitedIfZero(n: number): number {
  return n === 0 ? Infinity : n;
}

/**
 * The SD 1.5 sets `[models] base = "auto"` picks from. On the CPU provider an
 * fp32 set, where fp32 runs 1.5× (idle machine) to 7× (contended) faster per
 * UNet call than fp16 and peaks at 1.35× instead of 3.5× its files (ONNX
 * Runtime's CPU provider has few float16 kernels; docs/performance.md): the
 * pinned fp32 export (runwayml/stable-diffusion-v1-5, whose host is gone)
 * when it is in place, else the fp32 set that `deno task models` derives
 * from the downloaded fp16 one (`models.lock` `[[derived]]`). GPU providers:
 * the fp16 set (half the download and memory).
 */
export const AUTO_BASE = {
  /** The pinned fp32 export's folder under the models root. */
  fp32: "sd15-fp32",
  /** The folder of the fp32 set derived from the fp16 one. */
  fp32Derived: "sd15-fp32-derived",
  /** The fp16 set's folder under the models root. */
  fp16: "sd15",
  /** The file whose presence says the pinned fp32 export is in place (its largest). */
  fp32Marker: "sd15-fp32/unet/weights.pb",
} as const;

/**
 * Which set `[models] base = "auto"` picks by {@link AUTO_BASE} (asking
 * `exists` once about the fp32 export's marker); null for a named folder.
 */
function autoBase(
  base: string,
  provider: "cpu" | "cuda" | "webgpu",
  root: string,
  exists: (path: string) => boolean,
): "fp32" | "fp32-derived" | "fp16" | null {
  if (base !== "auto") return null;
  if (provider !== "cpu") return "fp16";
  return exists(join(root, ...AUTO_BASE.fp32Marker.split("/"))) ? "fp32" : "fp32-derived";
}

const AUTO_FOLDER = {
  "fp32": AUTO_BASE.fp32,
  "fp32-derived": AUTO_BASE.fp32Derived,
  "fp16": AUTO_BASE.fp16,
};
