/**
 * `generate_guided_image`: ControlNet-guided generation from a depth map or
 * a pose extracted from `input_image` (source §4).
 *
 * @module
 */

import { z } from "zod";
import type { ResolvedConfig } from "../mod/config/mod.ts";
import {
  CONTROL_MODES,
  imageString,
  NEGATIVE_PROMPT_SCHEMA,
  negativePrompt,
  positivePrompt,
  size,
  SIZE_SCHEMA,
} from "../mod/generation/mod.ts";
import { handOffDescription } from "../mod/jobs/mod.ts";
import { type ToolDefinition, ToolError } from "../mod/mcp/mod.ts";
import type { ControlMode } from "../mod/pipeline/types.ts";
import { type ImageToolDeps, jobToolAnnotations, rgbInputAt, submitOneImage } from "./job_tool.ts";

/** The JSON Schema shown in `tools/list`, verbatim from the source. */
export const GENERATE_GUIDED_IMAGE_SCHEMA = {
  type: "object",
  title: "generate_guided_imageArguments",
  properties: {
    positive_prompt: { type: "string", title: "Positive Prompt" },
    control_mode: {
      type: "string",
      enum: ["depth", "openpose", "openpose_full"],
      title: "Control Mode",
    },
    input_image: { type: "string", title: "Input Image" },
    negative_prompt: NEGATIVE_PROMPT_SCHEMA,
    size: SIZE_SCHEMA,
  },
  required: ["positive_prompt", "control_mode", "input_image"],
} as const;

/** zod validation of `generate_guided_image` arguments. */
export const generateGuidedImageArgs = z.strictObject({
  positive_prompt: positivePrompt,
  control_mode: z.enum(CONTROL_MODES, {
    error: (i) =>
      i.input === undefined
        ? `required: one of "depth", "openpose", "openpose_full"`
        : `must be one of "depth", "openpose", "openpose_full", got ${JSON.stringify(i.input)}`,
  }),
  input_image: imageString("input_image"),
  negative_prompt: negativePrompt,
  size,
});

/** What `generate_guided_image` needs. */
export interface GenerateGuidedImageDeps extends ImageToolDeps {
  controlnet: Pick<ResolvedConfig["controlnet"], "depth" | "openpose">;
}

/** The config key that enables the ControlNet a mode needs. */
export function controlNetKey(mode: ControlMode): "depth" | "openpose" {
  return mode === "depth" ? "depth" : "openpose";
}

/** Creates the `generate_guided_image` tool. */
export function createGenerateGuidedImageTool(
  deps: GenerateGuidedImageDeps,
): ToolDefinition<typeof generateGuidedImageArgs> {
  return {
    name: "generate_guided_image",
    description: "Generate an image whose composition follows input_image, with a ControlNet. " +
      'control_mode "depth" keeps the spatial layout (a depth map is estimated from the image); ' +
      '"openpose" keeps the body pose of the people in it; "openpose_full" also keeps hands and ' +
      "face. input_image is a base64 PNG or JPEG, or a data URI (data:image/png;base64,...). " +
      "The prompt decides content and style. The result is one PNG. " +
      handOffDescription(deps.jobs.maxWaitMs),
    inputSchema: GENERATE_GUIDED_IMAGE_SCHEMA,
    annotations: jobToolAnnotations("Generate guided image"),
    validate: generateGuidedImageArgs,
    async handle(args, context) {
      const receivedAt = Date.now();
      const key = controlNetKey(args.control_mode);
      if (!deps.controlnet[key].enabled) {
        throw new ToolError(
          "configuration",
          `control_mode "${args.control_mode}" needs the ${key} ControlNet, which is disabled ` +
            `on this server (controlnet.${key}.enabled = false)`,
        );
      }
      const sizeId = deps.images.resolveSize(args.size);
      return await submitOneImage(
        deps,
        context,
        receivedAt,
        () => rgbInputAt("input_image", args.input_image, sizeId),
        (image) => ({
          tool: "generate_guided_image",
          mode: "guided_image",
          controlMode: args.control_mode,
          image,
          positive: args.positive_prompt,
          negative: args.negative_prompt,
          size: sizeId,
        }),
      );
    },
  };
}
