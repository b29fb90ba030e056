/**
 * The input fields of the design-code tools, each as a hand-written JSON
 * Schema fragment (listed in `tools/list`) and the zod schema that validates
 * it. The two are written side by side so they stay equal.
 *
 * Source: the design-code HTTP I/O contract, "Tool 入力" field tables:
 * `design_id` string `^[a-zA-Z0-9_:-]+$`, length 1-255; `code_id` string,
 * length 1-255; `project_id`, `organization_id` integer `> 0`; `limit`
 * default 20, max 100; `offset` default 0, `>= 0`.
 *
 * zod messages do not repeat the field name: the MCP server prefixes each
 * with the zod issue's path ("project_id: must be …").
 *
 * @module
 */

import { z } from "zod";
import type { JsonSchema, ZodField, ZodShape } from "../mcp/tool.ts";

/** The contract's `design_id` pattern. */
export const ID_PATTERN = "^[a-zA-Z0-9_:-]+$";
const ID_REGEX = new RegExp(ID_PATTERN);
/** Longest `design_id` / `code_id`. */
export const ID_MAX_LENGTH = 255;
/** `limit` when the caller gives none. */
export const DEFAULT_LIMIT = 20;
/** Largest `limit`. */
export const MAX_LIMIT = 100;

/** A value as quoted in a message, cut so a huge argument cannot flood it. */
function show(value: unknown): string {
  if (value === undefined) return "nothing";
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 80 ? `${text.slice(0, 80)}…` : text;
}

function typeError(expected: string) {
  return (issue: { input?: unknown }): string =>
    issue.input === undefined ? "is required" : `must be ${expected}, got ${show(issue.input)}`;
}

/** A required id string: 1-255 characters of letters, digits, `_`, `:` and `-`. */
function idField() {
  return z
    .string({ error: typeError("a string") })
    .min(1, { error: () => "must not be empty", abort: true })
    .max(ID_MAX_LENGTH, {
      error: (issue) =>
        `must be at most ${ID_MAX_LENGTH} characters, got ${
          (issue.input as string).length
        } characters`,
      abort: true,
    })
    .regex(ID_REGEX, {
      error: (issue) =>
        `must contain only letters, digits, "_", ":" and "-" (${ID_PATTERN}), got ${
          show(issue.input)
        }`,
    });
}

/** An integer of at least `min` (a JavaScript safe integer). */
function integerField(min: number, expected: string) {
  return z
    .int({
      error: (issue) =>
        issue.input === undefined
          ? "is required"
          : typeof issue.input === "number" && Number.isInteger(issue.input)
          ? `must be an integer no larger than ${Number.MAX_SAFE_INTEGER}, got ${show(issue.input)}`
          : `must be ${expected}, got ${show(issue.input)}`,
    })
    .min(min, { error: (issue) => `must be ${expected}, got ${show(issue.input)}` });
}

/** `design_id`: zod schema. */
export const designIdSchema: ZodField<string> = idField();
/** `design_id`: JSON Schema. */
export const designIdJson: JsonSchema = {
  type: "string",
  minLength: 1,
  maxLength: ID_MAX_LENGTH,
  pattern: ID_PATTERN,
  description: "Backend design ID: <project_id>_<Figma file_id>_<node_id>, e.g. " +
    '"42_hDDA9BNori9OTXSClduXqR_40002029:37033". Letters, digits, "_", ":" and "-"; ' +
    "1-255 characters.",
};

/**
 * `code_id`: zod schema. The contract gives only "backend code UUID, length
 * 1-255"; the id pattern is added because the id becomes a URL path segment,
 * and UUIDs match it.
 */
export const codeIdSchema: ZodField<string> = idField();
/** `code_id`: JSON Schema. */
export const codeIdJson: JsonSchema = {
  type: "string",
  minLength: 1,
  maxLength: ID_MAX_LENGTH,
  pattern: ID_PATTERN,
  description: 'Backend code ID (a UUID), e.g. "0192a3b4-c5d6-4e8f-9a0b-1c2d3e4f5a6b". ' +
    "1-255 characters.",
};

/** `project_id`: zod schema. */
export const projectIdSchema: ZodField<number> = integerField(1, "an integer greater than 0");
/** `project_id`: JSON Schema. */
export const projectIdJson: JsonSchema = {
  type: "integer",
  minimum: 1,
  description: "Project ID (integer > 0). An API key bound to a project may only use that project.",
};

/** `organization_id` (required, for `trigger-des2code`): zod schema. */
export const organizationIdSchema: ZodField<number> = integerField(1, "an integer greater than 0");
/** `organization_id` (required): JSON Schema. */
export const organizationIdJson: JsonSchema = {
  type: "integer",
  minimum: 1,
  description: "Organization (tenant) ID that owns the project (integer > 0).",
};

/** `organization_id` (optional, list tools): zod schema; `null` means not given. */
export const optionalOrganizationIdSchema: ZodField<
  number | undefined,
  number | null | undefined
> = integerField(1, "an integer greater than 0")
  .nullish()
  .transform((value) => value ?? undefined);
/** `organization_id` (optional): JSON Schema. */
export const optionalOrganizationIdJson: JsonSchema = {
  type: "integer",
  minimum: 1,
  description: "Optional organization (tenant) ID to narrow the list (integer > 0).",
};

/** `limit`: zod schema; missing or `null` becomes 20, above 100 is an error. */
export const limitSchema: ZodField<number, number | null | undefined> = integerField(
  1,
  `an integer from 1 to ${MAX_LIMIT}`,
)
  .max(MAX_LIMIT, {
    error: (issue) => `must be an integer from 1 to ${MAX_LIMIT}, got ${show(issue.input)}`,
  })
  .nullish()
  .transform((value) => value ?? DEFAULT_LIMIT);
/** `limit`: JSON Schema. */
export const limitJson: JsonSchema = {
  type: "integer",
  minimum: 1,
  maximum: MAX_LIMIT,
  default: DEFAULT_LIMIT,
  description: `Maximum number of items to return (1-${MAX_LIMIT}, default ${DEFAULT_LIMIT}).`,
};

/** `offset`: zod schema; missing or `null` becomes 0. */
export const offsetSchema: ZodField<number, number | null | undefined> = integerField(
  0,
  "an integer of at least 0",
)
  .nullish()
  .transform((value) => value ?? 0);
/** `offset`: JSON Schema. */
export const offsetJson: JsonSchema = {
  type: "integer",
  minimum: 0,
  default: 0,
  description: "Number of items to skip, for paging (integer >= 0, default 0).",
};

/**
 * The parsed value of {@link argumentsSchema}`(shape)`: one property per
 * field, holding that field's parsed value; a field whose schema may yield
 * nothing (zod `optout: "optional"`) becomes an optional property. Mirrors
 * zod v4's `$InferObjectOutput` (zod `v4/core/schemas.d.ts`).
 */
export type ArgumentsOutput<Shape extends ZodShape> =
  & {
    -readonly [K in keyof Shape as Shape[K] extends { _zod: { optout: "optional" } } ? never : K]:
      Shape[K]["_zod"]["output"];
  }
  & {
    -readonly [K in keyof Shape as Shape[K] extends { _zod: { optout: "optional" } } ? K : never]?:
      Shape[K]["_zod"]["output"];
  };

/**
 * What {@link argumentsSchema}`(shape)` accepts: one property per field, of
 * that field's input type; a field that may be omitted (zod `optin:
 * "optional"` or `"defaulted"`) is an optional property. Mirrors zod v4's
 * `$InferObjectInput`.
 */
export type ArgumentsInput<Shape extends ZodShape> =
  & {
    -readonly [
      K in keyof Shape as Shape[K] extends { _zod: { optin: "optional" | "defaulted" } } ? never
        : K
    ]: Shape[K]["_zod"]["input"];
  }
  & {
    -readonly [
      K in keyof Shape as Shape[K] extends { _zod: { optin: "optional" | "defaulted" } } ? K
        : never
    ]?: Shape[K]["_zod"]["input"];
  };

/** The strict object schema {@link argumentsSchema} builds from `Shape`. */
export type ArgumentsSchema<Shape extends ZodShape> = ZodField<
  ArgumentsOutput<Shape>,
  ArgumentsInput<Shape>
>;

/**
 * Wraps a field shape in a strict object schema: unknown arguments are an
 * error (a misspelt optional filter must not be silently ignored), and so is
 * anything that is not an object.
 *
 * @param shape The fields.
 * @returns The object schema.
 */
export function argumentsSchema<Shape extends ZodShape>(
  shape: Shape,
): ArgumentsSchema<Shape> {
  const allowed = Object.keys(shape).join(", ");
  // TypeScript cannot prove zod's generic `$InferObjectOutput<Shape>` equal to
  // the mirrored `ArgumentsOutput<Shape>` for an open `Shape`; fields_test.ts
  // checks the two agree on a concrete shape with required, nullish and
  // transformed fields.
  const schema: z.ZodType = z.strictObject(shape, {
    error: (issue) =>
      issue.code === "unrecognized_keys"
        ? `unknown argument${issue.keys.length === 1 ? "" : "s"} ${
          issue.keys.map((key) => JSON.stringify(key)).join(", ")
        }; allowed: ${allowed}`
        : `must be an object, got ${show(issue.input)}`,
  });
  return schema as ArgumentsSchema<Shape>;
}
