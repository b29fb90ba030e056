/**
 * `generate_image`: text-to-image (contract §3 of `source/mcp-tools.ja.md`),
 * with the `name` and `count` extension of contract §2.1.
 *
 * @module
 */

import { z } from "zod";
import {
  type ImageService,
  NEGATIVE_PROMPT_SCHEMA,
  negativePrompt,
  pngContent,
  positivePrompt,
  singleImageResult,
  size,
  SIZE_SCHEMA,
} from "../mod/generation/mod.ts";
import {
  type ImageContent,
  type TextContent,
  type ToolDefinition,
  ToolError,
} from "../mod/mcp/mod.ts";
import { sanitizeName } from "../mod/output/mod.ts";
import { SIZES } from "../mod/pipeline/types.ts";

/** What `generate_image` needs. */
export interface GenerateImageDeps {
  images: ImageService;
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
      "(landscape_512) or 384x512 (portrait_512). Returns a PNG whose metadata holds the seed. " +
      "Steps, guidance, scheduler, model and seed are server settings, not inputs. " +
      "A generation takes from seconds to minutes depending on the hardware; progress is reported.",
    inputSchema: generateImageSchema(deps.maxCount),
    annotations: {
      title: "Generate image",
      readOnlyHint: false,
      destructiveHint: false,
      idempotentHint: false,
      openWorldHint: false,
    },
    validate: generateImageArgs(deps.maxCount),
    async handle(args, context) {
      const receivedAt = Date.now();
      const sizeId = deps.images.resolveSize(args.size);
      const count = args.count;
      const run = (index: number) => {
        const seed = deps.images.seedFor(index);
        return deps.images.generate(
          {
            mode: "text_to_image",
            positive: args.positive_prompt,
            negative: args.negative_prompt,
            size: sizeId,
            seed,
            name: args.name,
          },
          {
            signal: context.signal,
            receivedAt: index === 1 ? receivedAt : Date.now(),
            onProgress: (step, steps) =>
              void context.progress(
                (index - 1) * steps + step,
                count * steps,
                count > 1
                  ? `image ${index}/${count}, step ${step}/${steps}`
                  : `step ${step}/${steps}`,
              ),
          },
        );
      };
      if (count === 1) {
        // Exactly the un-extended result: one ImageContent (plus a note when the engine has one).
        return singleImageResult(await run(1));
      }
      const content: Array<ImageContent | TextContent> = [];
      let failures = 0;
      const { width, height } = SIZES[sizeId];
      for (let i = 1; i <= count; i++) {
        try {
          const o = await run(i);
          const saved = o.savedPath ? `, saved to ${o.savedPath}` : "";
          const notes = o.notes.length ? ` ${o.notes.join(" ")}` : "";
          content.push({
            type: "text",
            text:
              `[${i}/${count}] seed ${o.seed}, size ${sizeId} (${width}x${height})${saved}${notes}`,
          });
          content.push(pngContent(o.png));
        } catch (error) {
          if (context.signal.aborted) throw error;
          failures++;
          const reason = error instanceof ToolError || error instanceof Error
            ? error.message
            : String(error);
          content.push({ type: "text", text: `[${i}/${count}] failed: ${reason}` });
        }
      }
      return failures === count ? { content, isError: true } : { content };
    },
  };
}
