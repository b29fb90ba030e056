/**
 * `generate_image`: text-to-image (§3 of the MCP tools contract),
 * with the `name` and `count` extension of contract §2.1.
 *
 * @module
 */

import { z } from "zod";
import {
  type ImageService,
  NEGATIVE_PROMPT_SCHEMA,
  negativePrompt,
  positivePrompt,
  size,
  SIZE_SCHEMA,
} from "../mod/generation/mod.ts";
import { handOffDescription, type JobService } from "../mod/jobs/mod.ts";
import type { ToolDefinition } from "../mod/mcp/mod.ts";
import { sanitizeName } from "../mod/output/mod.ts";

/** What `generate_image` needs. */
export interface GenerateImageDeps {
  images: ImageService;
  /** Runs the call as a job and waits for it (bounded). */
  jobs: JobService;
  /** `generation.max_count`: the cap for `count`. */
  maxCount: number;
}

/** The JSON Schema shown in `tools/list`: the source's, plus `name` and `count`. */
export function generateImageSchema(maxCount: number) {
  return {
    type: "object",
    title: "generate_imageArguments",
    properties: {
      positive_prompt: { type: "string", title: "Positive Prompt" },
      negative_prompt: NEGATIVE_PROMPT_SCHEMA,
      size: SIZE_SCHEMA,
      name: {
        anyOf: [{ type: "string" }, { type: "null" }],
        default: null,
        title: "Name",
        description: "Optional label put in front of saved file names " +
          "({name}_{YYYYMMDD_HHMMSS}_{seed}.png). Characters outside A-Z, a-z, 0-9, _ and - " +
          "become _, and it is cut to 64 characters. Has no effect on the image.",
      },
      count: {
        anyOf: [{ type: "integer", minimum: 1, maximum: maxCount }, { type: "null" }],
        default: null,
        title: "Count",
        description: `How many images to generate from this prompt, one after another ` +
          `(1 to ${maxCount}; null means 1). With more than 1, the result lists ` +
          `"[i/N] …" text before each image.`,
      },
    },
    required: ["positive_prompt"],
  } as const;
}

/** zod validation of `generate_image` arguments. */
export function generateImageArgs(maxCount: number) {
  return z.strictObject({
    positive_prompt: positivePrompt,
    negative_prompt: negativePrompt,
    size,
    name: z.string({ error: (i) => `must be a string or null, got ${typeof i.input}` })
      .nullable().optional().transform((v) => sanitizeName(v)),
    count: z.int({
      error: (i) =>
        `must be a whole number from 1 to ${maxCount} or null, got ${JSON.stringify(i.input)}`,
    }).min(1, { error: (i) => `must be at least 1, got ${JSON.stringify(i.input)}` })
      .max(maxCount, {
        error: (i) =>
          `must be at most ${maxCount} (generation.max_count), got ${JSON.stringify(i.input)}`,
      }).nullable().optional().transform((v) => v ?? 1),
  });
}

/** Creates the `generate_image` tool. */
export function createGenerateImageTool(
  deps: GenerateImageDeps,
): ToolDefinition<ReturnType<typeof generateImageArgs>> {
  return {
    name: "generate_image",
    description: "Generate an image from a text prompt with Stable Diffusion 1.5, locally. " +
      "Write positive_prompt as a comma-separated description (subject, style, lighting); " +
      "put what to avoid in negative_prompt. size picks 512x512 (square_512), 512x384 " +
      "(landscape_512) or 384x512 (portrait_512). Returns a PNG whose metadata holds the seed " +
      '(count > 1: one per image, each after an "[i/N] …" text). Steps, guidance, scheduler, ' +
      "model and seed are server settings, not inputs. A generation takes from seconds to " +
      "minutes depending on the hardware; progress is reported. " +
      handOffDescription(deps.jobs.maxWaitMs),
    inputSchema: generateImageSchema(deps.maxCount),
    annotations: {
      title: "Generate image",
      readOnlyHint: false,
      destructiveHint: false,
      idempotentHint: false,
      openWorldHint: false,
    },
    validate: generateImageArgs(deps.maxCount),
    handle(args, context) {
      const receivedAt = Date.now();
      const seeds = Array.from({ length: args.count }, (_, i) => deps.images.seedFor(i + 1));
      // One job for the whole batch: its images come out in order, each kept as it finishes.
      return deps.jobs.submit({
        tool: "generate_image",
        mode: "text_to_image",
        positive: args.positive_prompt,
        negative: args.negative_prompt,
        size: deps.images.resolveSize(args.size),
        name: args.name,
        seeds,
        receivedAt,
      }, context);
    },
  };
}
