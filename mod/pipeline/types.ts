/**
 * The narrow interface between the MCP tools and the diffusion engine. Tool
 * handlers validate and decode input, then call
 * {@link Generator.generate}; everything ONNX lives behind it (in a Worker).
 *
 * @module
 */

/** The three generation sizes of the contract. */
export type SizeId = "square_512" | "landscape_512" | "portrait_512";

/** Width and height of each size id, in pixels (W×H). */
export const SIZES: Readonly<Record<SizeId, { width: number; height: number }>> = {
  square_512: { width: 512, height: 512 },
  landscape_512: { width: 512, height: 384 },
  portrait_512: { width: 384, height: 512 },
};

/** The output sizes of `upscale_image`: twice each {@link SizeId}. */
export type UpscaleSizeId = "square_1024" | "landscape_1024" | "portrait_1024";

/** Width and height of each upscale size id, in pixels (W×H). */
export const UPSCALE_SIZES: Readonly<Record<UpscaleSizeId, { width: number; height: number }>> = {
  square_1024: { width: 1024, height: 1024 },
  landscape_1024: { width: 1024, height: 768 },
  portrait_1024: { width: 768, height: 1024 },
};

/** Any output size id: a generation size or an upscale size. */
export type OutputSizeId = SizeId | UpscaleSizeId;

/** Width and height of any output size id. */
export function sizeOf(id: OutputSizeId): { width: number; height: number } {
  const size = (SIZES as Record<string, { width: number; height: number }>)[id] ??
    (UPSCALE_SIZES as Record<string, { width: number; height: number }>)[id];
  if (!size) throw new RangeError(`unknown size id ${JSON.stringify(id)}`);
  return size;
}

/** What produced an image; written to the PNG `mode` metadata. */
export type Mode =
  | "text_to_image"
  | "guided_image"
  | "inpaint_image"
  | "image_to_image"
  | "upscale_image";

/** The preprocessors of `generate_guided_image`. */
export type ControlMode = "depth" | "openpose" | "openpose_full";

/** An 8-bit RGB image, interleaved, row-major: `data.length === width * height * 3`. */
export interface RgbImage {
  /** Width in pixels. */
  width: number;
  /** Height in pixels. */
  height: number;
  /** R, G, B bytes (0..255) per pixel, rows top to bottom. */
  data: Uint8Array;
}

/**
 * A binary inpainting mask, one byte per pixel: 1 = regenerate (luminance
 * above 50%), 0 = keep.
 */
export interface Mask {
  /** Width in pixels. */
  width: number;
  /** Height in pixels. */
  height: number;
  /** One byte per pixel, rows top to bottom: 1 = regenerate, 0 = keep. */
  data: Uint8Array;
}

/** Fields shared by every generation request ({@link GenerationRequest}). */
export interface RequestBase {
  /** Final positive prompt (base prompt already joined). */
  positive: string;
  /** Final negative prompt (base prompt already joined). */
  negative: string;
  /** Output width in pixels (a multiple of 8). */
  width: number;
  /** Output height in pixels (a multiple of 8). */
  height: number;
  /** Seed for torch-compatible noise, 0..2^32-1. */
  seed: number;
}

/**
 * One image to generate. Images are already resized to `width`×`height`.
 * `image_to_image` re-runs the last `strength` of the denoising schedule from
 * the image (diffusers `StableDiffusionImg2ImgPipeline`); `upscale_image`
 * refines `image`, already enlarged to the output size, tile by tile at
 * `strength`.
 */
export type GenerationRequest =
  | RequestBase & { mode: "text_to_image" }
  | RequestBase & { mode: "guided_image"; controlMode: ControlMode; image: RgbImage }
  | RequestBase & { mode: "inpaint_image"; image: RgbImage; mask: Mask }
  | RequestBase & { mode: "image_to_image"; image: RgbImage; strength: number }
  | RequestBase & { mode: "upscale_image"; image: RgbImage; strength: number };

/** A generated image and what the model should be told about it. */
export interface GenerationResult {
  /** The decoded image, `width`×`height` of the request. */
  image: RgbImage;
  /** Remarks for the result text, e.g. "positive prompt truncated to 77 tokens". */
  notes: string[];
  /** Textual-inversion embeddings the prompts called, each once (PNG metadata). */
  embeddingsUsed?: EmbeddingUse[];
}

/** A textual-inversion embedding a prompt called. */
export interface EmbeddingUse {
  /** The word that called it. */
  name: string;
  /** First 12 hex digits of its file's sha256 (AUTOMATIC1111's "TI hashes"), when known. */
  hash?: string;
}

/** Options of one {@link Generator.generate} call. */
export interface GenerateOptions {
  /** Aborting stops the run at the next step boundary; the promise rejects. */
  signal?: AbortSignal;
  /**
   * Called after every denoising step with steps done and total steps (an
   * upscale counts the steps of all its tiles in one total).
   */
  onProgress?: (step: number, total: number) => void;
}

/** The diffusion engine as the tools see it. */
export interface Generator {
  /** Runs one generation. Rejects with a `ToolError` on expected failures. */
  generate(request: GenerationRequest, options?: GenerateOptions): Promise<GenerationResult>;
  /** Releases sessions and the worker. */
  close(): Promise<void>;
}
