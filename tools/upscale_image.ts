/**
 * `upscale_image`: a 2× enlargement with added detail, the "SD upscale" way:
 * PIL-exact Lanczos to the output size, then every 512×512 tile refined by
 * an image-to-image run at `[upscale] strength` and the tiles blended
 * (mod/pipeline/upscale.ts).
 *
 * @module
 */

import { z } from "zod";
import {
  imageString,
  NEGATIVE_PROMPT_SCHEMA,
  negativePrompt,
  optionalPositivePrompt,
  UPSCALE_SIZE_IDS,
  upscaleSize,
} from "../mod/generation/mod.ts";
import { closestAspect, decodeImageInput, toRgbImageClosest } from "../mod/image/mod.ts";
import { handOffDescription } from "../mod/jobs/mod.ts";
import type { ToolDefinition } from "../mod/mcp/mod.ts";
import { UPSCALE_SIZES, type UpscaleSizeId } from "../mod/pipeline/types.ts";
import { type ImageToolDeps, jobToolAnnotations, submitOneImage } from "./job_tool.ts";

/** The JSON Schema shown in `tools/list`, in the style of the source's image tools. */
export const UPSCALE_IMAGE_SCHEMA = {
  type: "object",
  title: "upscale_imageArguments",
  properties: {
    input_image: {
      type: "string",
      title: "Input Image",
      description: "The picture to enlarge: base64 PNG or JPEG, or a data URI " +
        "(data:image/png;base64,...), typically a 512x512, 512x384 or 384x512 result of the " +
        "other image tools. It is stretched to the output size.",
    },
    positive_prompt: {
      anyOf: [{ type: "string" }, { type: "null" }],
      default: null,
      title: "Positive Prompt",
      description: "Optional: what the picture shows and its style, to guide the detail that " +
        "is added (the prompt it was made with works well). null adds detail without a prompt.",
    },
    negative_prompt: NEGATIVE_PROMPT_SCHEMA,
    size: {
      anyOf: [{ type: "string", enum: [...UPSCALE_SIZE_IDS] }, { type: "null" }],
      default: null,
      title: "Size",
      description: "Output size: square_1024 (1024x1024), landscape_1024 (1024x768) or " +
        "portrait_1024 (768x1024). null picks the one closest to input_image's shape.",
    },
  },
  required: ["input_image"],
} as const;

/** zod validation of `upscale_image` arguments. */
export const upscaleImageArgs = z.strictObject({
  input_image: imageString("input_image"),
  positive_prompt: optionalPositivePrompt,
  negative_prompt: negativePrompt,
  size: upscaleSize,
});

/** What `upscale_image` needs. */
export type UpscaleImageDeps = ImageToolDeps;

const UPSCALE_SIZE_LIST = UPSCALE_SIZE_IDS.map((id) => UPSCALE_SIZES[id]);

/** The upscale size whose aspect ratio is closest to `width`×`height` (`closestAspect`). */
export function closestUpscaleSize(width: number, height: number): UpscaleSizeId {
  return UPSCALE_SIZE_IDS[closestAspect(width, height, UPSCALE_SIZE_LIST)];
}

/** Creates the `upscale_image` tool. */
export function createUpscaleImageTool(
  deps: UpscaleImageDeps,
): ToolDefinition<typeof upscaleImageArgs> {
  return {
    name: "upscale_image",
    description: "Enlarge an image 2x, to 1024x1024, 1024x768 or 768x1024, and add fine detail " +
      "with Stable Diffusion 1.5: it is resized with Lanczos, then refined tile by tile at a " +
      "low strength, so composition and colours stay as they are. input_image is a base64 PNG " +
      "or JPEG, or a data URI. The prompts are optional and only steer the added detail. An " +
      "upscale costs several generations (9 tiles at 1024x1024, 6 at the other sizes); " +
      "progress is reported over all tiles. The result is one PNG. " +
      handOffDescription(deps.jobs.maxWaitMs),
    inputSchema: UPSCALE_IMAGE_SCHEMA,
    annotations: jobToolAnnotations("Upscale image"),
    validate: upscaleImageArgs,
    async handle(args, context) {
      const receivedAt = Date.now();
      // The asked-for size, else the one closest to the input's shape (after EXIF orientation).
      const sizes = args.size ? [UPSCALE_SIZES[args.size]] : UPSCALE_SIZE_LIST;
      return await submitOneImage(
        deps,
        context,
        receivedAt,
        async () =>
          toRgbImageClosest(await decodeImageInput("input_image", args.input_image), sizes),
        (image) => ({
          tool: "upscale_image",
          mode: "upscale_image",
          image,
          positive: args.positive_prompt,
          negative: args.negative_prompt,
          size: args.size ??
            UPSCALE_SIZE_IDS.find((id) =>
              UPSCALE_SIZES[id].width === image.width && UPSCALE_SIZES[id].height === image.height
            )!,
        }),
      );
    },
  };
}
