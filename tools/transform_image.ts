/**
 * `transform_image`: image-to-image. The input image is encoded, noised to
 * the strength that `change` picks from `[transform]`, and the rest of the
 * schedule is denoised towards the prompt (diffusers
 * `StableDiffusionImg2ImgPipeline`, mod/pipeline/image_to_image.ts).
 *
 * @module
 */

import { z } from "zod";
import {
  change,
  CHANGE_LEVELS,
  imageString,
  NEGATIVE_PROMPT_SCHEMA,
  negativePrompt,
  positivePrompt,
  size,
  SIZE_SCHEMA,
} from "../mod/generation/mod.ts";
import { handOffDescription } from "../mod/jobs/mod.ts";
import type { ToolDefinition } from "../mod/mcp/mod.ts";
import { type ImageToolDeps, jobToolAnnotations, rgbInputAt, submitOneImage } from "./job_tool.ts";

/** The JSON Schema shown in `tools/list`, in the style of the source's image tools. */
export const TRANSFORM_IMAGE_SCHEMA = {
  type: "object",
  title: "transform_imageArguments",
  properties: {
    positive_prompt: {
      type: "string",
      title: "Positive Prompt",
      description: "The whole picture as it should look afterwards (subject, style, lighting), " +
        "not only what to change.",
    },
    input_image: {
      type: "string",
      title: "Input Image",
      description: "The picture to start from: base64 PNG or JPEG, or a data URI " +
        "(data:image/png;base64,...). It is stretched to the output size.",
    },
    change: {
      anyOf: [{ type: "string", enum: [...CHANGE_LEVELS] }, { type: "null" }],
      default: null,
      title: "Change",
      description: 'How far the result may move away from input_image: "subtle" keeps ' +
        'composition and colours and changes texture and detail; "moderate" keeps the layout ' +
        'and restyles what is in it; "strong" keeps only the rough layout and palette. ' +
        'null means "moderate".',
    },
    negative_prompt: NEGATIVE_PROMPT_SCHEMA,
    size: SIZE_SCHEMA,
  },
  required: ["positive_prompt", "input_image"],
} as const;

/** zod validation of `transform_image` arguments. */
export const transformImageArgs = z.strictObject({
  positive_prompt: positivePrompt,
  input_image: imageString("input_image"),
  change,
  negative_prompt: negativePrompt,
  size,
});

/** What `transform_image` needs. */
export type TransformImageDeps = ImageToolDeps;

/** Creates the `transform_image` tool. */
export function createTransformImageTool(
  deps: TransformImageDeps,
): ToolDefinition<typeof transformImageArgs> {
  return {
    name: "transform_image",
    description: "Redraw an existing picture as the prompt describes (image-to-image with " +
      "Stable Diffusion 1.5): variations, restyling, turning a sketch or photo into another " +
      "look. The result follows input_image's composition and colours as far as change " +
      'allows ("subtle", "moderate" or "strong"). input_image is a base64 PNG or JPEG, or a data ' +
      "URI; size picks 512x512 (square_512), 512x384 (landscape_512) or 384x512 " +
      "(portrait_512), and the input is stretched to it. Steps, guidance, scheduler, seed and " +
      "the strength behind each change level are server settings. The result is one PNG whose " +
      "metadata holds the seed. " + handOffDescription(deps.jobs.maxWaitMs),
    inputSchema: TRANSFORM_IMAGE_SCHEMA,
    annotations: jobToolAnnotations("Transform image"),
    validate: transformImageArgs,
    async handle(args, context) {
      const receivedAt = Date.now();
      const sizeId = deps.images.resolveSize(args.size);
      return await submitOneImage(
        deps,
        context,
        receivedAt,
        () => rgbInputAt("input_image", args.input_image, sizeId),
        (image) => ({
          tool: "transform_image",
          mode: "image_to_image",
          image,
          change: args.change,
          positive: args.positive_prompt,
          negative: args.negative_prompt,
          size: sizeId,
        }),
      );
    },
  };
}
