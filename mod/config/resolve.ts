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
import { ConfigError } from "./error.ts";
import type { ResolvedConfig } from "./resolved.ts";
import { AUTO_FOLDER, autoBase } from "./models.ts";
import { choosePreset, sessionMemory } from "./presets.ts";
import { resolveEmbeddings, resolveLoraFiles } from "./prompt.ts";
import type { RawConfig } from "./schema.ts";
import { resolveServer } from "./server.ts";

export type { ControlNetConfig, ResolvedConfig, SchedulerName } from "./resolved.ts";

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
