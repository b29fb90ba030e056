import { deepStrictEqual, ok, strictEqual } from "node:assert";
import { z } from "zod";
import {
  type ArgumentsInput,
  type ArgumentsOutput,
  argumentsSchema,
  codeIdSchema,
  designIdSchema,
  limitSchema,
  offsetSchema,
  optionalOrganizationIdSchema,
  projectIdSchema,
} from "./fields.ts";

const listArgs = argumentsSchema({
  project_id: projectIdSchema,
  organization_id: optionalOrganizationIdSchema,
  limit: limitSchema,
  offset: offsetSchema,
});
const designArgs = argumentsSchema({ design_id: designIdSchema });

/** The issues as "<path>: <message>", the way the MCP server formats them. */
function issues(schema: typeof listArgs | typeof designArgs, input: unknown): string[] {
  const parsed = schema.safeParse(input);
  ok(!parsed.success, `expected ${JSON.stringify(input)} to fail`);
  return parsed.error.issues.map((issue) => `${issue.path.join(".")}: ${issue.message}`);
}

Deno.test("list arguments get the contract defaults: limit 20, offset 0", () => {
  // An absent optional key stays absent; the handler reads it as undefined either way.
  deepStrictEqual(listArgs.parse({ project_id: 42 }), { project_id: 42, limit: 20, offset: 0 });
  deepStrictEqual(
    listArgs.parse({ project_id: 42, organization_id: null, limit: null, offset: null }),
    { project_id: 42, organization_id: undefined, limit: 20, offset: 0 },
  );
  deepStrictEqual(listArgs.parse({ project_id: 1, organization_id: 3, limit: 100, offset: 0 }), {
    project_id: 1,
    organization_id: 3,
    limit: 100,
    offset: 0,
  });
});

Deno.test("list arguments refuse out-of-range integers with field-level messages", () => {
  deepStrictEqual(issues(listArgs, { project_id: 0, limit: 101, offset: -1 }), [
    "project_id: must be an integer greater than 0, got 0",
    "limit: must be an integer from 1 to 100, got 101",
    "offset: must be an integer of at least 0, got -1",
  ]);
  deepStrictEqual(issues(listArgs, { project_id: "42", organization_id: 1.5, limit: 0 }), [
    'project_id: must be an integer greater than 0, got "42"',
    "organization_id: must be an integer greater than 0, got 1.5",
    "limit: must be an integer from 1 to 100, got 0",
  ]);
  deepStrictEqual(issues(listArgs, {}), ["project_id: is required"]);
  deepStrictEqual(issues(listArgs, { project_id: 2 ** 60 }), [
    "project_id: must be an integer no larger than 9007199254740991, got 1152921504606847000",
  ]);
});

Deno.test("argumentsSchema() refuses unknown arguments and non-objects", () => {
  deepStrictEqual(issues(listArgs, { project_id: 42, org_id: 1 }), [
    ': unknown argument "org_id"; allowed: project_id, organization_id, limit, offset',
  ]);
  deepStrictEqual(issues(designArgs, null), [": must be an object, got null"]);
});

Deno.test("design_id and code_id follow ^[a-zA-Z0-9_:-]+$ with 1-255 characters", () => {
  const good = "42_hDDA9BNori9OTXSClduXqR_40002029:37033";
  strictEqual(designIdSchema.parse(good), good);
  strictEqual(designIdSchema.parse("x".repeat(255)), "x".repeat(255));
  strictEqual(
    codeIdSchema.parse("0192a3b4-c5d6-4e8f-9a0b-1c2d3e4f5a6b"),
    "0192a3b4-c5d6-4e8f-9a0b-1c2d3e4f5a6b",
  );
  deepStrictEqual(issues(designArgs, { design_id: "" }), ["design_id: must not be empty"]);
  deepStrictEqual(issues(designArgs, { design_id: "x".repeat(256) }), [
    "design_id: must be at most 255 characters, got 256 characters",
  ]);
  deepStrictEqual(issues(designArgs, { design_id: "42/../x" }), [
    'design_id: must contain only letters, digits, "_", ":" and "-" (^[a-zA-Z0-9_:-]+$), got "42/../x"',
  ]);
  deepStrictEqual(issues(designArgs, { design_id: 42 }), ["design_id: must be a string, got 42"]);
  deepStrictEqual(issues(designArgs, {}), ["design_id: is required"]);
  for (const bad of [".", "..", "a b", "a.b", "ä", "a\n"]) {
    strictEqual(codeIdSchema.safeParse(bad).success, false, bad);
  }
});

/** `true` exactly when each type is assignable to the other. */
type MutuallyAssignable<A, B> = [A] extends [B] ? [B] extends [A] ? true : false : false;

Deno.test("ArgumentsOutput/ArgumentsInput agree with zod's own object inference", () => {
  // Required, optional, and nullish-with-default fields: the three ways a key's
  // optionality differs between input and output.
  const shape = {
    id: z.string(),
    note: z.string().optional(),
    count: z.number().nullish().transform((value) => value ?? 7),
  };
  type Zod = z.ZodObject<typeof shape, z.core.$strict>;
  // Compile-time: assigning `true` fails to type-check if the mirror diverges.
  const outputAgrees: MutuallyAssignable<z.output<Zod>, ArgumentsOutput<typeof shape>> = true;
  const inputAgrees: MutuallyAssignable<z.input<Zod>, ArgumentsInput<typeof shape>> = true;
  ok(outputAgrees && inputAgrees);
  // Run-time: the schema applies the transform's default and keeps `note` absent.
  const parsed: ArgumentsOutput<typeof shape> = argumentsSchema(shape).parse({ id: "a" });
  deepStrictEqual(parsed, { id: "a", count: 7 });
  strictEqual("note" in parsed, false);
});
