/**
 * Input rules shared by the image tools (contract §2): prompts, size and the
 * image-to-image `change`, as zod schemas whose messages name the rule and
 * the value.
 *
 * @module
 */

import { z } from "zod";
import type { SizeId, UpscaleSizeId } from "../pipeline/types.ts";
import type { ZodField } from "../mcp/tool.ts";

/** Longest prompt, in characters (Unicode code points). */
export const MAX_PROMPT_CHARS = 10_000;

/** The size ids, in schema order. */
export const SIZE_IDS = [
  "square_512",
  "landscape_512",
  "portrait_512",
] as const satisfies readonly SizeId[];

const codePoints = (s: string) => {
  let n = 0;
  for (const _ of s) n++;
  return n;
};

/** The prompt length rule: at most {@link MAX_PROMPT_CHARS} code points. */
function checkLength(ctx: { value: string; issues: unknown[] }): void {
  const n = codePoints(ctx.value);
  if (n > MAX_PROMPT_CHARS) {
    ctx.issues.push({
      code: "custom",
      input: ctx.value,
      message: `is ${n} characters long; the limit is ${MAX_PROMPT_CHARS}`,
    });
  }
}

/** `positive_prompt`: required string, non-empty after trimming, ≤ 10,000 characters. */
export const positivePrompt: ZodField<string> = z.string({
  error: (issue) =>
    issue.input === undefined
      ? "required: describe the image to generate"
      : `must be a string, got ${issue.input === null ? "null" : typeof issue.input}`,
}).check((ctx) => {
  if (ctx.value.trim() === "") {
    ctx.issues.push({
      code: "custom",
      input: ctx.value,
      message: "must not be empty or only whitespace",
    });
  }
  checkLength(ctx);
});

/** An optional prompt: a string or null (= ""), ≤ 10,000 characters, may be empty. */
const optionalPrompt = (): ZodField<string, string | null | undefined> =>
  z.string({
    error: (issue) => `must be a string or null, got ${typeof issue.input}`,
  }).check(checkLength).nullable().optional().transform((v) => v ?? "");

/** `negative_prompt`: optional string or null (= ""), ≤ 10,000 characters. */
export const negativePrompt: ZodField<string, string | null | undefined> = optionalPrompt();

/**
 * `positive_prompt` of `upscale_image`: optional string or null (= "", only
 * the configured base prompt guides the refinement), ≤ 10,000 characters.
 */
export const optionalPositivePrompt: ZodField<string, string | null | undefined> = optionalPrompt();

/** `size`: one of the size ids, or null/missing for the configured default. */
export const size: ZodField<SizeId | null, SizeId | null | undefined> = z.enum(SIZE_IDS, {
  error: (issue) =>
    `must be one of ${SIZE_IDS.map((s) => `"${s}"`).join(", ")} or null, got ${
      JSON.stringify(issue.input)
    }`,
}).nullable().optional().transform((v) => v ?? null);

/** The `change` levels of `transform_image`, from least to most. */
export const CHANGE_LEVELS = ["subtle", "moderate", "strong"] as const;

/** How much `transform_image` changes the input (a strength from `[transform]`). */
export type ChangeLevel = typeof CHANGE_LEVELS[number];

/** `change`: one of the levels, or null/missing for "moderate". */
export const change: ZodField<ChangeLevel, ChangeLevel | null | undefined> = z.enum(
  CHANGE_LEVELS,
  {
    error: (issue) =>
      `must be one of ${CHANGE_LEVELS.map((s) => `"${s}"`).join(", ")} or null, got ${
        JSON.stringify(issue.input)
      }`,
  },
).nullable().optional().transform((v) => v ?? "moderate");

/** The upscale size ids, in schema order. */
export const UPSCALE_SIZE_IDS = [
  "square_1024",
  "landscape_1024",
  "portrait_1024",
] as const satisfies readonly UpscaleSizeId[];

/** `size` of `upscale_image`: an upscale size id, or null/missing to follow the input's shape. */
export const upscaleSize: ZodField<UpscaleSizeId | null, UpscaleSizeId | null | undefined> = z
  .enum(UPSCALE_SIZE_IDS, {
    error: (issue) =>
      `must be one of ${UPSCALE_SIZE_IDS.map((s) => `"${s}"`).join(", ")} or null, got ${
        JSON.stringify(issue.input)
      }`,
  }).nullable().optional().transform((v) => v ?? null);

/** A required image string; its content is checked by the image decoder. */
export const imageString = (field: string): ZodField<string> =>
  z.string({
    error: (issue) =>
      issue.input === undefined
        ? `required: a base64 PNG/JPEG or data URI for ${field}`
        : `must be a string (base64 or data URI), got ${
          issue.input === null ? "null" : typeof issue.input
        }`,
  });

/**
 * Joins the configured base prompts with the user's (contract §2): positive
 * `"<base>, <user>"`, negative `"<base>\n<user>"`; an empty side is left out
 * so no dangling separator reaches the tokenizer.
 */
export function joinPrompts(
  base: { positive: string; negative: string },
  positive: string,
  negative: string,
): { positive: string; negative: string } {
  const join = (b: string, u: string, sep: string) =>
    b === "" ? u : u === "" ? b : `${b}${sep}${u}`;
  return {
    positive: join(base.positive, positive, ", "),
    negative: join(base.negative, negative, "\n"),
  };
}

/** JSON Schema fragment of the shared `negative_prompt` property (verbatim from the source). */
export const NEGATIVE_PROMPT_SCHEMA = {
  anyOf: [{ type: "string" }, { type: "null" }],
  default: null,
  title: "Negative Prompt",
} as const;

/** JSON Schema fragment of the shared `size` property (verbatim from the source). */
export const SIZE_SCHEMA = {
  anyOf: [
    { type: "string", enum: ["square_512", "landscape_512", "portrait_512"] },
    { type: "null" },
  ],
  default: null,
  title: "Size",
} as const;
