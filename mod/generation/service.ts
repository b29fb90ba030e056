/**
 * The path every image takes once its job runs: engine → PNG with metadata
 * → optional save. Tool handlers decode and validate, the job queue
 * (mod/jobs) runs one job at a time; this module owns seeds, timing,
 * metadata and saving, so the image tools behave alike.
 *
 * @module
 */

import { type SamplingSummary, samplingText } from "../config/mod.ts";
import { encodePng, MAX_CONCURRENT_DECODES, MAX_CONCURRENT_DECODES_PER_KEY } from "../image/mod.ts";
import { log } from "../log/mod.ts";
import { imageFileName, savePng } from "../output/mod.ts";
import { type ImageContent, ToolError } from "../mcp/tool.ts";
import type {
  GenerationRequest,
  Generator,
  Mode,
  OutputSizeId,
  RgbImage,
  SizeId,
} from "../pipeline/types.ts";
import { sizeOf } from "../pipeline/types.ts";
import { SharedLimit } from "../queue/mod.ts";
import { randomSeedU32 } from "../random/mod.ts";
import { type ChangeLevel, joinPrompts } from "./inputs.ts";

/** What the service needs from the configuration. */
export interface ImageServiceOptions {
  /** The engine that runs the diffusion pipeline. */
  generator: Generator;
  /** The preset and sampling every image is made with (PNG metadata, batch texts). */
  sampling?: SamplingSummary;
  /**
   * `[prompt]`: base prompts joined with the user's (contract §2); how
   * prompts are read and the CLIP skip, for the PNG metadata (absent: not
   * written).
   */
  prompt: { positive: string; negative: string; syntax?: string; clipSkip?: number };
  /** Size used when the request gives none (`[generation] default_size`). */
  defaultSize: SizeId;
  /** Fixed seed, or null for random seeds. */
  seed: number | null;
  /** `[output]`: whether to write each PNG to disk, and the absolute folder. */
  output: { save: boolean; dir: string };
  /**
   * The strengths of `transform_image` per `change` (`[transform]`) and of
   * `upscale_image` (`[upscale]`); without them those jobs fail as a
   * configuration error.
   */
  strengths?: { transform: Record<ChangeLevel, number>; upscale: number };
  /** Clock, replaceable in tests. */
  now?: () => Date;
}

/** One image to make: validated user input plus, for the image-input modes, decoded images. */
export type ImageJob =
  & {
    positive: string;
    negative: string;
    /** A generation size, or an upscale size for `upscale_image`. */
    size: OutputSizeId;
    seed: number;
    /** Sanitized name prefix for the saved file, or null. */
    name: string | null;
  }
  & (
    | { mode: "text_to_image" }
    | Omit<Extract<GenerationRequest, { mode: "guided_image" }>, keyof BaseFields>
    | Omit<Extract<GenerationRequest, { mode: "inpaint_image" }>, keyof BaseFields>
    | { mode: "image_to_image"; image: RgbImage; change: ChangeLevel }
    | { mode: "upscale_image"; image: RgbImage }
  );

/** The request fields an {@link ImageJob} carries in its own names (size id instead of width/height). */
export type BaseFields = {
  positive: string;
  negative: string;
  width: number;
  height: number;
  seed: number;
};

/** A finished image. */
export interface ImageOutcome {
  /** The encoded PNG file. */
  png: Uint8Array;
  /** The seed actually used (the request's, the configured one, or a random u32). */
  seed: number;
  /** The size id the image was made at. */
  size: OutputSizeId;
  /** Which tool mode made it: text_to_image, guided_image, inpaint_image, image_to_image or upscale_image. */
  mode: Mode;
  /** Absolute path when saved. */
  savedPath?: string;
  /** Remarks from the engine (e.g. prompt truncation). */
  notes: string[];
}

/** Per-call options. */
export interface ImageRunOptions {
  /** Aborts the image (job cancelled): the run stops at the next step boundary. */
  signal?: AbortSignal;
  /** When the request arrived (ms since epoch); elapsed time counts from here. */
  receivedAt: number;
  /** Called after every denoising step with steps done and total steps. */
  onProgress?: (step: number, total: number) => void;
}

/** See the module documentation. */
export class ImageService {
  #o: ImageServiceOptions;
  #now: () => Date;
  #decodes = new SharedLimit(MAX_CONCURRENT_DECODES, MAX_CONCURRENT_DECODES_PER_KEY);

  /** Creates the service. */
  constructor(options: ImageServiceOptions) {
    this.#o = options;
    this.#now = options.now ?? (() => new Date());
  }

  /**
   * Runs input preparation (decoding and resizing user images) at most
   * {@link MAX_CONCURRENT_DECODES} at a time, since each decode may hold a
   * 40-megapixel image in memory, and at most
   * {@link MAX_CONCURRENT_DECODES_PER_KEY} of them for API key `keyPrefix`
   * (undefined over stdio: one local client, no share). Callers check the
   * queue has room first, so a full queue refuses before any decoding.
   */
  prepareInputs<T>(keyPrefix: string | undefined, prepare: () => Promise<T>): Promise<T> {
    return this.#decodes.run(keyPrefix ?? null, prepare);
  }

  /** `fast preset (lcm, 4 steps, guidance 1, tiny VAE)`, or "" without a configured sampling. */
  get samplingText(): string {
    return this.#o.sampling ? samplingText(this.#o.sampling) : "";
  }

  /** The size to use for a request's `size` (null = configured default). */
  resolveSize(size: SizeId | null): SizeId {
    return size ?? this.#o.defaultSize;
  }

  /**
   * The seed of image `index` (1-based) of a batch: `(seed + index − 1) mod
   * 2^32` with a fixed seed, else a fresh random u32.
   */
  seedFor(index: number): number {
    if (this.#o.seed === null) return randomSeedU32();
    return (this.#o.seed + index - 1) % 2 ** 32;
  }

  /** The engine request of `job`; the image-to-image strengths come from the config. */
  #request(job: ImageJob, base: BaseFields): GenerationRequest {
    switch (job.mode) {
      case "text_to_image":
        return { ...base, mode: "text_to_image" };
      case "guided_image":
        return { ...base, mode: "guided_image", controlMode: job.controlMode, image: job.image };
      case "inpaint_image":
        return { ...base, mode: "inpaint_image", image: job.image, mask: job.mask };
      case "image_to_image":
        return {
          ...base,
          mode: "image_to_image",
          image: job.image,
          strength: this.#strengths().transform[job.change],
        };
      case "upscale_image":
        return {
          ...base,
          mode: "upscale_image",
          image: job.image,
          strength: this.#strengths().upscale,
        };
    }
  }

  #strengths(): NonNullable<ImageServiceOptions["strengths"]> {
    const strengths = this.#o.strengths;
    if (!strengths) {
      throw new ToolError(
        "configuration",
        "image-to-image strengths ([transform], [upscale]) are not configured in this server",
      );
    }
    return strengths;
  }

  /** Generates, encodes and (when configured) saves one image; the caller holds the engine. */
  async generate(job: ImageJob, options: ImageRunOptions): Promise<ImageOutcome> {
    const { width, height } = sizeOf(job.size);
    const prompts = joinPrompts(this.#o.prompt, job.positive, job.negative);
    const base = { ...prompts, width, height, seed: job.seed };
    const request: GenerationRequest = this.#request(job, base);
    let lastStep = 0;
    let totalSteps = 0;
    let result;
    try {
      options.signal?.throwIfAborted();
      result = await this.#o.generator.generate(request, {
        signal: options.signal,
        onProgress: (step, total) => {
          lastStep = step;
          totalSteps = total;
          options.onProgress?.(step, total);
        },
      });
    } catch (error) {
      if (options.signal?.aborted) {
        log("info", "generation", "cancelled", {
          mode: job.mode,
          seed: job.seed,
          step: lastStep,
          total: totalSteps,
        });
      } else {
        log("warn", "generation", "failed", {
          mode: job.mode,
          seed: job.seed,
          error: (error as Error)?.message ?? String(error),
        });
      }
      throw error;
    }
    const finished = this.#now();
    const elapsed = Math.max(0, finished.getTime() - options.receivedAt) / 1000;
    const s = this.#o.sampling;
    const png = await encodePng(result.image, {
      seed: String(job.seed),
      size: job.size,
      mode: job.mode,
      timestamp: finished.toISOString(),
      elapsed_seconds: elapsed.toFixed(3),
      ...promptMetadata(this.#o.prompt, prompts, result.embeddingsUsed ?? []),
      // Which preset ran: the single-image result is the PNG alone (contract §2).
      ...(s
        ? {
          preset: s.preset,
          steps: String(s.steps),
          scheduler: s.scheduler,
          guidance_scale: String(s.guidanceScale),
          // η changes a tcd or ddim image as much as the seed does: without it one cannot redo it.
          ...(s.eta !== undefined ? { eta: String(s.eta) } : {}),
          vae_decoder: s.vaeDecoder,
        }
        : {}),
    });
    log("info", "generation", "done", {
      mode: job.mode,
      size: job.size,
      seed: job.seed,
      steps: totalSteps,
      elapsed_seconds: Number(elapsed.toFixed(3)),
    });
    let savedPath: string | undefined;
    if (this.#o.output.save) {
      savedPath = await savePng(
        this.#o.output.dir,
        imageFileName(job.name, finished, job.seed),
        png,
      );
    }
    return { png, seed: job.seed, size: job.size, mode: job.mode, savedPath, notes: result.notes };
  }
}

/** The MCP `ImageContent` of a PNG. */
export function pngContent(png: Uint8Array): ImageContent {
  return { type: "image", data: png.toBase64(), mimeType: "image/png" };
}

/**
 * The PNG metadata of the prompts: both as the text encoder read them (the
 * base prompts joined, brackets and all, never cut), how they were read,
 * the CLIP skip, and the embeddings called with their short hashes in
 * AUTOMATIC1111's "TI hashes" form (`name: hash, …`, `:` and `,` dropped
 * from names: `modules/sd_hijack_clip.py` `forward`,
 * AUTOMATIC1111/stable-diffusion-webui commit 5ad03e65).
 */
export function promptMetadata(
  config: ImageServiceOptions["prompt"],
  prompts: { positive: string; negative: string },
  embeddings: ReadonlyArray<{ name: string; hash?: string }>,
): Record<string, string> {
  const out: Record<string, string> = { prompt: prompts.positive };
  if (prompts.negative !== "") out.negative_prompt = prompts.negative;
  if (config.syntax !== undefined) out.prompt_syntax = config.syntax;
  if (config.clipSkip !== undefined) out.clip_skip = String(config.clipSkip);
  if (embeddings.length > 0) {
    out.embeddings = embeddings.map((e) => e.name).join(", ");
    const hashes = embeddings.filter((e) => e.hash !== undefined).map((e) =>
      `${e.name.replaceAll(":", "").replaceAll(",", "")}: ${e.hash}`
    );
    if (hashes.length > 0) out.ti_hashes = hashes.join(", ");
  }
  return out;
}
