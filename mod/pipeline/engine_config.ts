/**
 * The part of the resolved configuration the engine needs. It crosses the
 * Worker boundary by structured clone, so it is plain data.
 *
 * @module
 */

import { join } from "node:path";
import type { ResolvedConfig } from "../config/resolve.ts";
import type { EngineEmbedding } from "./text_encoder_open.ts";
import { SIZES } from "./types.ts";

/** Generation settings that apply to every request (never tool inputs). */
export type GenerationSettings = Pick<
  ResolvedConfig["generation"],
  "steps" | "guidanceScale" | "scheduler" | "timestepSpacing" | "karras" | "eta"
>;

/** What the engine reads from the config. */
export interface EngineConfig {
  /** Model locations (absolute). */
  models: Pick<ResolvedConfig["models"], "base" | "controlnetUnet"> & {
    /** "tiny": decode with `tinyVaeDecoder` (TAESD, latents unscaled); default "full". */
    vaeDecoder?: "full" | "tiny";
    /** Absolute path of the tiny VAE decoder. */
    tinyVaeDecoder?: string;
    /**
     * Absolute folder of a VAE set (`vae_decoder/`, `vae_encoder/`) decoding
     * (unless the tiny decoder is chosen) and encoding instead of the base
     * set's; absent = the base set's own (`[models] vae`).
     */
    vae?: string;
    /**
     * Models with the configured LoRAs already merged in (the on-disk cache
     * of `mod/models` `prepareMergedModels`), opened instead of the base
     * set's; `lora` is then empty.
     */
    merged?: MergedModels;
  };
  /** ONNX Runtime session settings. */
  runtime: ResolvedConfig["runtime"];
  /** Denoising settings. */
  generation: GenerationSettings;
  /**
   * How prompts are read and encoded (`[prompt]`); absent: "plain", clip
   * skip 1, no embeddings (the engine as it was before prompts had a syntax).
   */
  prompt?: EnginePrompt;
  /** ControlNets and their preprocessors. */
  controlnet: ResolvedConfig["controlnet"];
  /** LoRAs blended into the UNet(s) and text encoder; absent or empty = none. */
  lora?: ResolvedConfig["lora"];
  /**
   * Serve image-to-image and upscaling (`transform_image`, `upscale_image`),
   * which loads the VAE encoder, with the strengths the server may ask for
   * (`[transform]`, `[upscale]`; checked against the scheduler at start-up).
   * Absent: only inpainting loads the encoder, and those requests are refused
   * as a configuration error.
   */
  imageToImage?: { strengths: Array<{ key: string; value: number }> };
  /**
   * Make one image of one step at this size once the models are loaded,
   * right after the engine reports ready and before any request
   * (`warm_up.ts`); absent: none.
   */
  warmUp?: { width: number; height: number };
}

/** The engine's part of `[prompt]`. */
export interface EnginePrompt {
  /** "a1111": AUTOMATIC1111's syntax and 75-token chunks; "plain": as is, cut at 77. */
  syntax: ResolvedConfig["prompt"]["syntax"];
  /** AUTOMATIC1111's CLIP skip (1 = the last layer). */
  clipSkip: number;
  /**
   * `[prompt] embeddings`: textual-inversion embedding files (absolute) and
   * the word of each, read when the engine loads; their rows are appended to
   * the text encoder's token table and a prompt calls them by the word
   * ("a1111" only).
   */
  embeddingFiles?: Array<{ path: string; name: string }>;
  /** Embeddings with their vectors already read (tests); when set, `embeddingFiles` is not read. */
  embeddings?: EngineEmbedding[];
}

/** Paths of models with the LoRAs merged in; a missing one has no LoRA module (open the base's). */
export interface MergedModels {
  /** The text encoder. */
  textEncoder?: string;
  /** The plain UNet. */
  unet?: string;
  /** The UNet that takes ControlNet residuals. */
  controlnetUnet?: string;
}

/**
 * Picks the engine's part of a resolved config; with `merged` (the LoRAs
 * merged on disk already) the engine opens those models and merges nothing.
 */
export function engineConfigOf(config: ResolvedConfig, merged?: MergedModels): EngineConfig {
  const g = config.generation;
  return {
    models: {
      base: config.models.base,
      controlnetUnet: config.models.controlnetUnet,
      vaeDecoder: config.models.vaeDecoder,
      tinyVaeDecoder: config.models.tinyVaeDecoder,
      ...(config.models.vae ? { vae: config.models.vae } : {}),
      ...(merged ? { merged: { ...merged } } : {}),
    },
    runtime: { ...config.runtime },
    generation: {
      steps: g.steps,
      guidanceScale: g.guidanceScale,
      scheduler: g.scheduler,
      timestepSpacing: g.timestepSpacing,
      karras: g.karras,
      eta: g.eta,
    },
    prompt: {
      syntax: config.prompt.syntax,
      clipSkip: config.prompt.clipSkip,
      embeddingFiles: config.prompt.embeddings.map((e) => ({ ...e })),
    },
    controlnet: structuredClone(config.controlnet),
    lora: merged ? { files: [] } : structuredClone(config.lora),
    ...(config.runtime.warmUp ? { warmUp: { ...SIZES[config.generation.defaultSize] } } : {}),
    imageToImage: {
      strengths: [
        { key: "[transform] subtle", value: config.transform.subtle },
        { key: "[transform] moderate", value: config.transform.moderate },
        { key: "[transform] strong", value: config.transform.strong },
        { key: "[upscale] strength", value: config.upscale.strength },
      ],
    },
  };
}

/**
 * File locations inside the SD 1.5 folder (diffusers ONNX layout, as the
 * Hugging Face SD 1.5 ONNX repositories publish it); the VAE's inside `vae`
 * when a VAE set is configured (`[models] vae`).
 */
export function basePaths(base: string, vae?: string): {
  textEncoder: string;
  unet: string;
  vaeDecoder: string;
  vaeEncoder: string;
  tokenizer: string;
  schedulerConfig: string;
} {
  return {
    textEncoder: join(base, "text_encoder", "model.onnx"),
    unet: join(base, "unet", "model.onnx"),
    vaeDecoder: join(vae ?? base, "vae_decoder", "model.onnx"),
    vaeEncoder: join(vae ?? base, "vae_encoder", "model.onnx"),
    tokenizer: join(base, "tokenizer"),
    schedulerConfig: join(base, "scheduler", "scheduler_config.json"),
  };
}
