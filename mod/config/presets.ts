/**
 * The sampling presets (`[generation] preset`): what each sets, which one
 * `"auto"` picks by execution provider, the check that a written scheduler
 * goes with a preset's LoRA, the session-memory settings a preset implies,
 * and the one-line summary of what ran.
 *
 * @module
 */

import type { SchedulerName } from "../schedulers/mod.ts";
import { ConfigError } from "./error.ts";
import type { PresetName, ResolvedConfig } from "./resolved.ts";
import type { RawConfig } from "./schema.ts";

export type { PresetName } from "./resolved.ts";

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
export function sessionMemory(
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

/** `preset = "auto"`: fast on the CPU provider, quality on GPU providers. */
export function autoPreset(provider: "cpu" | "cuda" | "webgpu"): "fast" | "quality" {
  return provider === "cpu" ? "fast" : "quality";
}

/**
 * The preset `[generation] preset` resolves to ("auto" by execution provider,
 * the old "default" read as "custom") and its values.
 *
 * @throws ConfigError when `generation.scheduler` is written and is not the
 *   scheduler the preset's distillation LoRA samples with
 */
export function choosePreset(
  raw: Pick<RawConfig, "generation" | "runtime">,
  where: string,
): { preset: PresetName; presetSource: "auto" | "config"; values: PresetValues } {
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
  return { preset, presetSource, values };
}
