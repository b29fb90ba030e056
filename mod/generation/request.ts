/**
 * One call of an image tool as a self-contained, storable request, and the
 * code that turns it into the content the tool returns. The tool handler
 * validates, decodes and resizes, then hands over a {@link ImageRequest};
 * whoever runs it later (the job runner) needs nothing else. The result is
 * built exactly as the tools always built it: one `ImageContent` (plus a note)
 * for a single image, `[i/N] …` text before each image of a batch (contract
 * §2.1).
 *
 * @module
 */

import { log } from "../log/mod.ts";
import { shownPath } from "../output/mod.ts";
import { type ImageContent, type TextContent, ToolError } from "../mcp/tool.ts";
import type { ControlMode, Mask, OutputSizeId, RgbImage } from "../pipeline/types.ts";
import { sizeOf } from "../pipeline/types.ts";
import type { ChangeLevel } from "./inputs.ts";
import { type ImageJob, type ImageService, pngContent } from "./service.ts";

/** The tools that make images. */
export type ImageToolName =
  | "generate_image"
  | "generate_guided_image"
  | "inpaint_image"
  | "transform_image"
  | "upscale_image";

/** A validated image-tool call, with decoded inputs and the seed of every image. */
export type ImageRequest =
  & {
    /** The tool that was called (its name prefixes unexpected-failure messages). */
    tool: ImageToolName;
    /** The user's positive prompt (the base prompt is joined when each image is made). */
    positive: string;
    /** The user's negative prompt ("" when none). */
    negative: string;
    /**
     * The resolved size id: a generation size (`SizeId`), or for
     * `upscale_image` an upscale size (`UpscaleSizeId`), the size of `image`.
     */
    size: OutputSizeId;
    /** Sanitized saved-file prefix, or null. */
    name: string | null;
    /** One seed per image, in order; its length is the number of images. */
    seeds: number[];
    /** When the call arrived (ms since epoch): image 1's elapsed time counts from here. */
    receivedAt: number;
  }
  & (
    | { mode: "text_to_image" }
    | { mode: "guided_image"; controlMode: ControlMode; image: RgbImage }
    | { mode: "inpaint_image"; image: RgbImage; mask: Mask }
    /** `transform_image`: `image` at the size; `change` picks a strength from `[transform]`. */
    | { mode: "image_to_image"; image: RgbImage; change: ChangeLevel }
    /** `upscale_image`: `image` already enlarged (PIL Lanczos) to the upscale size. */
    | { mode: "upscale_image"; image: RgbImage }
  );

/** Where a running request is: image `image` of `images`, step `step` of `steps`. */
export interface RequestProgress {
  /** The image being made, 1-based. */
  image: number;
  /** Images in the request. */
  images: number;
  /** Denoising steps done for this image. */
  step: number;
  /** Denoising steps per image. */
  steps: number;
}

/** Hooks a runner gives {@link runImageRequest}. */
export interface RunHooks {
  /** Aborting stops the run at the next step boundary; finished items are kept. */
  signal: AbortSignal;
  /** Called after every denoising step. */
  onProgress(progress: RequestProgress): void;
  /** Called when image `index` starts. */
  onImageStart?(index: number): void;
  /** Receives the content items of each finished (or failed) image, in order; awaited. */
  onItems(items: Array<TextContent | ImageContent>, index: number): Promise<void>;
}

/** How a run ended; the items went to {@link RunHooks.onItems}. */
export interface RunOutcome {
  /** `failed`: the single image, or every image of a batch, failed. */
  state: "succeeded" | "failed" | "cancelled";
  /** The failure text of a single-image request (its whole tool error). */
  error: string | null;
}

/** A batch is a `generate_image` call with more than one seed; anything else is one image. */
export function isBatch(request: ImageRequest): boolean {
  return request.seeds.length > 1;
}

function imageJob(request: ImageRequest, index: number): ImageJob {
  const base = {
    positive: request.positive,
    negative: request.negative,
    size: request.size,
    seed: request.seeds[index - 1],
    name: request.name,
  };
  switch (request.mode) {
    case "text_to_image":
      return { ...base, mode: "text_to_image" };
    case "guided_image":
      return {
        ...base,
        mode: "guided_image",
        controlMode: request.controlMode,
        image: request.image,
      };
    case "inpaint_image":
      return { ...base, mode: "inpaint_image", image: request.image, mask: request.mask };
    case "image_to_image":
      return { ...base, mode: "image_to_image", image: request.image, change: request.change };
    case "upscale_image":
      return { ...base, mode: "upscale_image", image: request.image };
  }
}

const message = (error: unknown) =>
  error instanceof Error ? error.message : String(error ?? "unknown error");

/**
 * Makes every image of `request` in order, passing each image's content
 * items to `hooks.onItems` as soon as it is done. A failing image of a batch
 * becomes `[i/N] failed: <reason>` and the batch goes on (contract §2.1).
 */
export async function runImageRequest(
  images: ImageService,
  request: ImageRequest,
  hooks: RunHooks,
): Promise<RunOutcome> {
  const count = request.seeds.length;
  if (!isBatch(request)) {
    hooks.onImageStart?.(1);
    try {
      const outcome = await images.generate(imageJob(request, 1), {
        signal: hooks.signal,
        receivedAt: request.receivedAt,
        onProgress: (step, steps) => hooks.onProgress({ image: 1, images: 1, step, steps }),
      });
      // Exactly the un-extended result: one ImageContent (plus a note when the engine has one).
      const items: Array<TextContent | ImageContent> = [pngContent(outcome.png)];
      if (outcome.notes.length) items.push({ type: "text", text: outcome.notes.join(" ") });
      await hooks.onItems(items, 1);
      return { state: "succeeded", error: null };
    } catch (error) {
      if (hooks.signal.aborted) return { state: "cancelled", error: null };
      if (error instanceof ToolError) return { state: "failed", error: error.message };
      log("error", "mcp", `tool ${request.tool} failed unexpectedly`, {
        error: (error as Error)?.stack ?? String(error),
      });
      return { state: "failed", error: `${request.tool} failed: ${message(error)}` };
    }
  }
  const { width, height } = sizeOf(request.size);
  let failures = 0;
  for (let i = 1; i <= count; i++) {
    if (hooks.signal.aborted) return { state: "cancelled", error: null };
    hooks.onImageStart?.(i);
    let items: Array<TextContent | ImageContent>;
    try {
      const o = await images.generate(imageJob(request, i), {
        signal: hooks.signal,
        receivedAt: i === 1 ? request.receivedAt : Date.now(),
        onProgress: (step, steps) => hooks.onProgress({ image: i, images: count, step, steps }),
      });
      const saved = o.savedPath ? `, saved to ${shownPath(o.savedPath)}` : "";
      const sampling = images.samplingText ? `, ${images.samplingText}` : "";
      const notes = o.notes.length ? ` ${o.notes.join(" ")}` : "";
      items = [
        {
          type: "text",
          text:
            `[${i}/${count}] seed ${o.seed}, size ${request.size} (${width}x${height})${sampling}${saved}${notes}`,
        },
        pngContent(o.png),
      ];
    } catch (error) {
      if (hooks.signal.aborted) return { state: "cancelled", error: null };
      failures++;
      items = [{ type: "text", text: `[${i}/${count}] failed: ${message(error)}` }];
    }
    await hooks.onItems(items, i);
  }
  return { state: failures === count ? "failed" : "succeeded", error: null };
}
