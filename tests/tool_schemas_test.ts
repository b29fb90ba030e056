/**
 * The image tools' JSON Schemas are the source documents' verbatim
 * (`tests/fixtures/source_tool_schemas.json` is extracted from
 * `spec/source/mcp-tools.ja.md`), with only the §2.1 extension added.
 */

import assert from "node:assert/strict";
import { GENERATE_GUIDED_IMAGE_SCHEMA } from "../tools/generate_guided_image.ts";
import { generateImageSchema } from "../tools/generate_image.ts";
import { INPAINT_IMAGE_SCHEMA } from "../tools/inpaint_image.ts";

const source = JSON.parse(
  await Deno.readTextFile(new URL("./fixtures/source_tool_schemas.json", import.meta.url)),
);

Deno.test("generate_guided_image and inpaint_image schemas equal the source", () => {
  assert.deepEqual(GENERATE_GUIDED_IMAGE_SCHEMA, source.generate_guided_image);
  assert.deepEqual(INPAINT_IMAGE_SCHEMA, source.inpaint_image);
});

Deno.test("generate_image is the source schema plus name and count", () => {
  const schema = structuredClone(generateImageSchema(10)) as Record<string, unknown> & {
    properties: Record<string, Record<string, unknown>>;
  };
  const { name, count, ...rest } = schema.properties;
  assert.deepEqual({ ...schema, properties: rest }, source.generate_image);
  assert.deepEqual(name.anyOf, [{ type: "string" }, { type: "null" }]);
  assert.equal(name.default, null);
  assert.deepEqual(count.anyOf, [{ type: "integer", minimum: 1, maximum: 10 }, { type: "null" }]);
  assert.equal(count.default, null);
  assert.ok(String(count.description).includes("1 to 10"));
  assert.ok(String(name.description).length > 40);
});
