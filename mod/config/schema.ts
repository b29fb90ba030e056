/**
 * The raw shape of `config.toml`, as zod schemas. Every key is optional and
 * has the default written in the repository's `config.toml`; unknown keys are
 * errors so that a typo never silently falls back to a default.
 *
 * @module
 */

import { z } from "zod";
import { SCHEDULER_NAMES } from "../schedulers/mod.ts";
import type { ZodField } from "../mcp/tool.ts";

const SIZE_IDS = ["square_512", "landscape_512", "portrait_512"] as const;

const relativePath = z.string().min(1, "must be a non-empty path");

const server = z.strictObject({
  transport: z.enum(["stdio", "http"]).default("stdio"),
  host: z.string().min(1).default("127.0.0.1"),
  port: z.int().min(0).max(65535).default(8080),
  environment: z.string().regex(
    /^[a-z][a-z0-9_-]*$/,
    "must be a lowercase word such as production or local",
  )
    .default("production"),
  allowed_origins: z.array(
    z.url({
      protocol: /^https?$/,
      message: "must be an http(s) origin such as https://example.com",
    }),
  ).default([]),
  shutdown_grace_seconds: z.number().min(0).max(3600).default(120),
  data_dir: relativePath.default(".data"),
  header_timeout_seconds: z.number().min(0.1).max(600).default(10),
  body_min_bytes_per_second: z.int().min(0).max(1_000_000_000).default(32_768),
  idle_timeout_seconds: z.number().min(0.1).max(3600).default(60),
  max_connections: z.int().min(1).max(1_000_000).default(512),
  max_connections_per_client: z.int().min(1).max(1_000_000).default(32),
  client_connections_per_second: z.number().min(0.1).max(1_000_000).default(50),
  max_pending_heads: z.int().min(1).max(1_000_000).default(128),
  trusted_proxies: z.array(z.string().min(1)).default([]),
  forwarded_header: z.enum(["x-forwarded-for", "forwarded"]).default("x-forwarded-for"),
  max_requests_per_key: z.int().min(1).max(100_000).default(32),
  role: z.enum(["all", "front", "worker"]).default("all"),
});

const auth = z.strictObject({
  cache_seconds: z.number().min(0).max(3600).default(30),
  db_timeout_ms: z.int().min(50).max(60_000).default(2000),
  last_used_interval_seconds: z.number().min(1).max(86_400).default(60),
  scrypt_concurrency: z.int().min(1).max(64).default(4),
  verify_queue_limit: z.int().min(1).max(10_000).default(32),
  failures_per_minute: z.int().min(1).max(10_000).default(10),
  unknown_prefix_cache_ms: z.int().min(0).max(600_000).default(2000),
});

const backend = z.strictObject({
  timeout_ms: z.int().min(100).max(600_000).default(15_000),
  max_response_bytes: z.int().min(1024).max(1024 * 1024 * 1024).default(8 * 1024 * 1024),
});

const models = z.strictObject({
  root: relativePath.default("models"),
  lock: relativePath.default("models.lock"),
  base: relativePath.default("auto"),
  controlnet_unet: relativePath.default("sd15/controlnet_unet/model.onnx"),
  // No default: absent means the preset's ([generation] preset, resolve.ts).
  vae_decoder: z.enum(["full", "tiny"]).optional(),
  tiny_vae_decoder: relativePath.default("taesd/vae_decoder/model.onnx"),
  // No default: absent means the base set's own VAE.
  vae: relativePath.optional(),
  lcm_lora: relativePath.regex(/\.safetensors$/, 'must be a ".safetensors" file')
    .default("lora/lcm-lora-sdv1-5/pytorch_lora_weights.safetensors"),
  turbo_lora: relativePath.regex(/\.safetensors$/, 'must be a ".safetensors" file')
    .default("lora/hyper-sd/Hyper-SD15-1step-lora.safetensors"),
});

const runtime = z.strictObject({
  execution_provider: z.enum(["cpu", "cuda", "webgpu"]).default("cpu"),
  intra_op_threads: z.int().min(0).max(1024).default(0),
  inter_op_threads: z.int().min(0).max(1024).default(0),
  graph_optimization: z.enum(["disabled", "basic", "extended", "all"]).default("all"),
  cpu_mem_arena: z.union([z.boolean(), z.literal("auto")]).default("auto"),
  memory_pattern: z.union([z.boolean(), z.literal("auto")]).default("auto"),
  execution_mode: z.enum(["sequential", "parallel"]).default("sequential"),
  optimized_cache: z.boolean().default(true),
  warm_up: z.union([z.boolean(), z.literal("auto")]).default("auto"),
});

const generation = z.strictObject({
  default_size: z.enum(SIZE_IDS).default("square_512"),
  // No defaults: absent means the preset's (resolve.ts `PRESETS`); written ones win.
  steps: z.int().min(1).max(500).optional(),
  guidance_scale: z.number().min(0).max(50).optional(),
  scheduler: z.enum(SCHEDULER_NAMES).optional(),
  timestep_spacing: z.enum(["auto", "leading", "trailing", "linspace"]).default("auto"),
  karras: z.boolean().default(false),
  // No default: absent means the preset's (turbo 1, the others 0).
  eta: z.number().min(0).max(1).optional(),
  seed: z.int().min(-1).max(4_294_967_295).default(-1),
  max_count: z.int().min(1).max(100).default(10),
  queue_limit: z.int().min(0).max(1000).default(8),
  queue_share_per_key: z.int().min(0).max(1000).default(2),
  queue_share_per_project: z.int().min(0).max(1000).default(3),
  // "default" is the old name of "custom" (configs written before presets were picked per provider).
  preset: z.enum(["auto", "fast", "turbo", "quality", "custom", "default"]).default("auto"),
  max_wait_seconds: z.number().min(0).max(86_400).default(50),
});

/** A textual-inversion embedding file under the models root (mod/prompt `embedding_file.ts`). */
const embeddingPath = relativePath.regex(
  /\.(safetensors|pt|bin)$/i,
  'must be a ".safetensors", ".pt" or ".bin" embedding file',
);

const prompt = z.strictObject({
  positive: z.string().max(10_000).default(""),
  negative: z.string().max(10_000).default(""),
  // "a1111": AUTOMATIC1111's emphasis, BREAK and 75-token chunks; "plain": the text as is, cut at 77.
  syntax: z.enum(["a1111", "plain"]).default("a1111"),
  // AUTOMATIC1111's numbering: 1 = the last layer, 2 = the penultimate (diffusers clip_skip 1).
  clip_skip: z.int().min(1).max(12).default(1),
  // Textual-inversion embeddings: a path, or { path, name } where name replaces the file's stem
  // as the word that calls it.
  embeddings: z.array(z.union([
    embeddingPath,
    z.strictObject({
      path: embeddingPath,
      name: z.string().regex(/\S/, "must be a word the prompt can use").max(200).optional(),
    }),
  ])).default([]),
});

const scale = z.number().min(0).max(5);

const controlnet = z.strictObject({
  depth: z.strictObject({
    enabled: z.boolean().default(false),
    model: relativePath.default("controlnet/depth.onnx"),
    preprocessor: relativePath.default("annotators/depth.onnx"),
    preprocessor_input: z.enum(["unit", "signed"]).default("unit"),
    conditioning_scale: scale.default(1.0),
  }).prefault({}),
  openpose: z.strictObject({
    enabled: z.boolean().default(false),
    model: relativePath.default("controlnet/openpose.onnx"),
    detector: relativePath.default("annotators/yolox_l.onnx"),
    estimator: relativePath.default("annotators/dw-ll_ucoco_384.onnx"),
    conditioning_scale: scale.default(1.0),
  }).prefault({}),
  inpaint: z.strictObject({
    enabled: z.boolean().default(false),
    model: relativePath.default("controlnet/inpaint.onnx"),
    conditioning_scale: scale.default(0.5),
  }).prefault({}),
});

/** One LoRA: a kohya `.safetensors` file under the models root and its weight. */
const loraFile = z.strictObject({
  path: relativePath.regex(/\.safetensors$/, 'must be a ".safetensors" file'),
  weight: z.number().min(-10).max(10).default(1.0),
});

const lora = z.strictObject({
  files: z.array(loraFile).default([]),
});

/** An image-to-image strength: the share of the denoising schedule re-run from the image. */
const strength = z.number().gt(0, "must be above 0 (0 would keep the image as it is)").max(1);

const transform = z.strictObject({
  subtle: strength.default(0.3),
  moderate: strength.default(0.5),
  strong: strength.default(0.75),
});

const upscale = z.strictObject({
  strength: strength.default(0.3),
});

const jobs = z.strictObject({
  result_ttl_seconds: z.number().min(1).max(30 * 86_400).default(3600),
  max_result_mib: z.number().min(1).max(1_048_576).default(512),
  lease_seconds: z.number().min(1).max(3600).default(30),
  max_jobs_per_key: z.int().min(0).max(1000).default(4),
  max_images_per_key: z.int().min(0).max(100_000).default(20),
  max_jobs_per_project: z.int().min(0).max(1000).default(6),
  max_images_per_project: z.int().min(0).max(100_000).default(40),
  max_result_mib_per_key: z.number().min(0).max(1_048_576).default(128),
});

const output = z.strictObject({
  save: z.boolean().default(false),
  dir: relativePath.default("outputs"),
});

/** The whole raw config file; missing sections take their defaults. */
const rawConfigObject = z.strictObject({
  server: server.prefault({}),
  auth: auth.prefault({}),
  backend: backend.prefault({}),
  models: models.prefault({}),
  runtime: runtime.prefault({}),
  generation: generation.prefault({}),
  prompt: prompt.prefault({}),
  controlnet: controlnet.prefault({}),
  lora: lora.prefault({}),
  transform: transform.prefault({}),
  upscale: upscale.prefault({}),
  output: output.prefault({}),
  jobs: jobs.prefault({}),
});

/** The raw config after zod applied defaults (paths still relative). */
export type RawConfig = z.output<typeof rawConfigObject>;

/**
 * Validates a parsed `config.toml` (any TOML value) and applies the defaults;
 * unknown keys are errors.
 */
export const RawConfigSchema: ZodField<RawConfig, unknown> = rawConfigObject;
