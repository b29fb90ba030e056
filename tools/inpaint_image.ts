/**
 * `inpaint_image`: regenerate the white part of `mask_image` in
 * `input_image` with the inpaint ControlNet (source §5).
 *
 * @module
 */

import { z } from "zod";
import type { ControlNetConfig } from "../mod/config/mod.ts";
import {
  imageString,
  NEGATIVE_PROMPT_SCHEMA,
  negativePrompt,
  positivePrompt,
  size,
  SIZE_SCHEMA,
} from "../mod/generation/mod.ts";
import { decodeImageInput, toMask, toRgbImage } from "../mod/image/mod.ts";
import { handOffDescription } from "../mod/jobs/mod.ts";
import { type ToolDefinition, ToolError } from "../mod/mcp/mod.ts";
import { SIZES } from "../mod/pipeline/types.ts";
import { type ImageToolDeps, jobToolAnnotations, submitOneImage } from "./job_tool.ts";

/** The JSON Schema shown in `tools/list`, verbatim from the source. */
export const INPAINT_IMAGE_SCHEMA = {
  type: "object",
  title: "inpaint_imageArguments",
  properties: {
    positive_prompt: { type: "string", title: "Positive Prompt" },
    input_image: { type: "string", title: "Input Image" },
    mask_image: { type: "string", title: "Mask Image" },
    negative_prompt: NEGATIVE_PROMPT_SCHEMA,
    size: SIZE_SCHEMA,
  },
  required: ["positive_prompt", "input_image", "mask_image"],
} as const;

/** zod validation of `inpaint_image` arguments. */
export const inpaintImageArgs = z.strictObject({
  positive_prompt: positivePrompt,
  input_image: imageString("input_image"),
  mask_image: imageString("mask_image"),
  negative_prompt: negativePrompt,
  size,
});

/** What `inpaint_image` needs. */
export interface InpaintImageDeps extends ImageToolDeps {
  inpaint: ControlNetConfig;
}

/** Creates the `inpaint_image` tool. */
export function createInpaintImageTool(
  deps: InpaintImageDeps,
): ToolDefinition<typeof inpaintImageArgs> {
  return {
    name: "inpaint_image",
    description: "Repaint part of an image. mask_image marks what to regenerate: white (brighter " +
      "than 50% gray) is regenerated from the prompt, black is kept exactly. Both images are " +
      "base64 PNG or JPEG, or data URIs; they are stretched to the output size. The prompt " +
      "should describe the whole picture as it should look. The result is one PNG. " +
      handOffDescription(deps.jobs.maxWaitMs),
    inputSchema: INPAINT_IMAGE_SCHEMA,
    annotations: jobToolAnnotations("Inpaint image"),
    validate: inpaintImageArgs,
    async handle(args, context) {
      const receivedAt = Date.now();
      if (!deps.inpaint.enabled) {
        throw new ToolError(
          "configuration",
          "inpaint_image needs the inpaint ControlNet, which is disabled on this server " +
            "(controlnet.inpaint.enabled = false)",
        );
      }
      const sizeId = deps.images.resolveSize(args.size);
      const { width, height } = SIZES[sizeId];
      return await submitOneImage(
        deps,
        context,
        receivedAt,
        async () => {
          const [decodedImage, decodedMask] = await Promise.all([
            decodeImageInput("input_image", args.input_image),
            decodeImageInput("mask_image", args.mask_image),
          ]);
          return await Promise.all([
            toRgbImage(decodedImage, width, height),
            toMask(decodedMask, width, height),
          ]);
        },
        ([image, mask]) => {
          if (!mask.data.includes(1)) {
            throw new ToolError(
              "image",
              "mask_image has no pixel brighter than 50% gray, so there is nothing to regenerate; " +
                "paint the area to repaint white and the rest black",
            );
          }
          return {
            tool: "inpaint_image",
            mode: "inpaint_image",
            image,
            mask,
            positive: args.positive_prompt,
            negative: args.negative_prompt,
            size: sizeId,
          };
        },
      );
    },
  };
}
