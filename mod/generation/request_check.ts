/**
 * The check a worker runs on every job it claims, before anything of it
 * runs: the stored request must be one the tool boundary could have made.
 * A job row comes from the database, which other processes share (replicas,
 * a second server on the same data dir, anyone with the `DATABASE_URL`), so
 * its fields are checked as strictly as the tools check their arguments:
 * the prompts by the tools' own rules, the size, the tool and its mode, the
 * seeds, the saved-file name (exactly what the name cleaning produces, so a
 * `../../x` row cannot write outside `output.dir`), and the decoded images'
 * dimensions and bytes.
 *
 * One table, {@link REQUEST_MODES}, holds what each mode adds: the tool that
 * makes it, whether it may be a batch, its own fields and their cross-checks.
 * A new mode of {@link ImageRequest} must add its row (the table's type
 * requires every mode), and the check covers it.
 *
 * @module
 */

import { z } from "zod";
import type { ZodIssue, ZodShape } from "../mcp/tool.ts";
import { sanitizeName } from "../output/mod.ts";
import type { ControlMode, OutputSizeId } from "../pipeline/types.ts";
import { sizeOf } from "../pipeline/types.ts";
import {
  CHANGE_LEVELS,
  MAX_PROMPT_CHARS,
  positivePrompt,
  SIZE_IDS,
  UPSCALE_SIZE_IDS,
} from "./inputs.ts";
import type { ImageRequest, ImageToolName } from "./request.ts";

/** The `control_mode` values of `generate_guided_image`. */
export const CONTROL_MODES = [
  "depth",
  "openpose",
  "openpose_full",
] as const satisfies readonly ControlMode[];

/** What the check needs from the configuration. */
export interface RequestRules {
  /** `[generation] max_count`: the most images of one batch. */
  maxCount: number;
}

/** Reports one problem at `path` of the request. */
export type AddIssue = (path: string, message: string) => void;

/** What one mode of {@link ImageRequest} adds to the common fields. */
export interface RequestMode {
  /** The one tool whose calls become this mode. */
  tool: ImageToolName;
  /** Whether a request of this mode may make more than one image (`count`). */
  batch: boolean;
  /** The output sizes its tool offers (the 512 sizes, or the upscale's 1024 ones). */
  sizes: readonly OutputSizeId[];
  /** Its own fields, as zod schemas (the object is strict: no other field passes). */
  fields: ZodShape;
  /** Checks across fields (e.g. an input image's size against the request's size). */
  check?(request: Record<string, unknown>, size: OutputSizeId, add: AddIssue): void;
}

const u32 = z.int({ error: "must be a whole number" }).min(0, "must be 0 or more")
  .max(4_294_967_295, "must be at most 4294967295");

const pixels = z.strictObject({
  width: z.int().min(1),
  height: z.int().min(1),
  data: z.instanceof(Uint8Array, { error: "must be bytes" }),
});

/** A prompt that may be empty, within the tools' length limit. */
const promptText = z.string({ error: "must be a string" }).refine(
  (v) => Array.from(v).length <= MAX_PROMPT_CHARS,
  `is longer than the limit of ${MAX_PROMPT_CHARS} characters`,
);

/** An RGB image at `path` must have the request's size and 3 bytes per pixel. */
function rgbAtSize(path: string, value: unknown, size: OutputSizeId, add: AddIssue): void {
  const image = value as { width: number; height: number; data: Uint8Array };
  const { width, height } = sizeOf(size);
  if (image.width !== width || image.height !== height) {
    add(path, `is ${image.width}x${image.height}, but size ${size} is ${width}x${height}`);
  } else if (image.data.length !== width * height * 3) {
    add(`${path}.data`, `has ${image.data.length} bytes, not ${width * height * 3} (RGB)`);
  }
}

/**
 * Every mode of {@link ImageRequest} and what it adds; see the module
 * documentation. The mapped type makes a missing mode a type error.
 */
export const REQUEST_MODES: { readonly [M in ImageRequest["mode"]]: RequestMode } = {
  text_to_image: { tool: "generate_image", batch: true, sizes: SIZE_IDS, fields: {} },
  guided_image: {
    tool: "generate_guided_image",
    batch: false,
    sizes: SIZE_IDS,
    fields: { controlMode: z.enum(CONTROL_MODES), image: pixels },
    check: (r, size, add) => rgbAtSize("image", r.image, size, add),
  },
  inpaint_image: {
    tool: "inpaint_image",
    batch: false,
    sizes: SIZE_IDS,
    fields: { image: pixels, mask: pixels },
    check(r, size, add) {
      rgbAtSize("image", r.image, size, add);
      const mask = r.mask as { width: number; height: number; data: Uint8Array };
      const { width, height } = sizeOf(size);
      if (mask.width !== width || mask.height !== height) {
        add("mask", `is ${mask.width}x${mask.height}, but size ${size} is ${width}x${height}`);
      } else if (mask.data.length !== width * height) {
        add("mask.data", `has ${mask.data.length} bytes, not ${width * height} (one per pixel)`);
      } else if (mask.data.some((v) => v > 1)) {
        add("mask.data", "must hold only 0 (keep) and 1 (regenerate)");
      } else if (!mask.data.includes(1)) {
        add("mask.data", "has no pixel to regenerate");
      }
    },
  },
  image_to_image: {
    tool: "transform_image",
    batch: false,
    sizes: SIZE_IDS,
    fields: { image: pixels, change: z.enum(CHANGE_LEVELS) },
    check: (r, size, add) => rgbAtSize("image", r.image, size, add),
  },
  upscale_image: {
    tool: "upscale_image",
    batch: false,
    sizes: UPSCALE_SIZE_IDS,
    // The upscale's prompts are optional: an empty positive prompt is one the tool makes.
    fields: { image: pixels, positive: promptText },
    // The tool stores the Lanczos enlargement, so the image is at the output size.
    check: (r, size, add) => rgbAtSize("image", r.image, size, add),
  },
};

/** The fields every mode has, with the tools' own rules where a tool argument became one. */
const common = {
  positive: positivePrompt,
  negative: promptText,
  size: z.enum([...SIZE_IDS, ...UPSCALE_SIZE_IDS]),
  name: z.string().nullable().check((ctx) => {
    if (ctx.value !== null && sanitizeName(ctx.value) !== ctx.value) {
      ctx.issues.push({
        code: "custom",
        input: ctx.value,
        message: `${JSON.stringify(ctx.value.slice(0, 80))} is not a cleaned file label ` +
          "(A-Z, a-z, 0-9, _ and -, at most 64, with a letter or digit)",
      });
    }
  }),
  seeds: z.array(u32).min(1, "must hold at least one seed"),
  receivedAt: z.number().min(0).refine(Number.isFinite, "must be a time"),
};

/** Why a stored request was refused: every problem found, by field. */
export class RequestCheckError extends Error {
  /** The problems, as `field: message`. */
  readonly problems: string[];

  /** Creates the error for `problems`. */
  constructor(problems: string[]) {
    super(
      `the stored request of this job is not one the tools make, so it was not run: ${
        problems.join("; ")
      }`,
    );
    this.name = "RequestCheckError";
    this.problems = problems;
  }
}

function describe(issue: ZodIssue): string {
  if (issue.code === "unrecognized_keys") {
    return `unknown field${issue.keys.length > 1 ? "s" : ""} ${
      issue.keys.map((k) => `"${k}"`).join(", ")
    }`;
  }
  return `${issue.path.length ? issue.path.map(String).join(".") : "request"}: ${issue.message}`;
}

/**
 * Returns `value` as an {@link ImageRequest} when it is one the tools could
 * have made under `rules`; throws a {@link RequestCheckError} naming every
 * problem otherwise.
 */
export function checkImageRequest(value: unknown, rules: RequestRules): ImageRequest {
  const problems: string[] = [];
  const mode = (value as { mode?: unknown } | null)?.mode;
  const rule = typeof mode === "string" && Object.hasOwn(REQUEST_MODES, mode)
    ? REQUEST_MODES[mode as ImageRequest["mode"]]
    : null;
  if (!rule) {
    throw new RequestCheckError([
      `mode: ${JSON.stringify(mode)} is not one of ${
        Object.keys(REQUEST_MODES).map((m) => `"${m}"`).join(", ")
      }`,
    ]);
  }
  const schema = z.strictObject({
    ...common,
    mode: z.literal(mode as string),
    tool: z.literal(rule.tool, { error: `must be "${rule.tool}" for mode "${mode}"` }),
    ...rule.fields,
  });
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new RequestCheckError(parsed.error.issues.map(describe));
  const request = parsed.data as Record<string, unknown> & {
    seeds: number[];
    size: OutputSizeId;
  };
  if (!rule.sizes.includes(request.size)) {
    problems.push(
      `size: "${request.size}" is not one of ${rule.tool}'s sizes (${
        rule.sizes.map((s) => `"${s}"`).join(", ")
      })`,
    );
  }
  const most = rule.batch ? rules.maxCount : 1;
  if (request.seeds.length > most) {
    problems.push(
      `seeds: ${request.seeds.length} images, but ${rule.tool} makes at most ${most}` +
        (rule.batch ? " (generation.max_count)" : ""),
    );
  }
  rule.check?.(request, request.size, (path, message) => problems.push(`${path}: ${message}`));
  if (problems.length) throw new RequestCheckError(problems);
  return request as unknown as ImageRequest;
}
