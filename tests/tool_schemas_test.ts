/**
 * The image tools' JSON Schemas are the source documents' verbatim
 * (`tests/fixtures/source_tool_schemas.json` is extracted from
 * the MCP tools contract), with only the §2.1 extension added; the
 * two tools the source does not have are written in its style (snapshot).
 */

import assert from "node:assert/strict";
import { GENERATE_GUIDED_IMAGE_SCHEMA } from "../tools/generate_guided_image.ts";
import { generateImageSchema } from "../tools/generate_image.ts";
import { INPAINT_IMAGE_SCHEMA } from "../tools/inpaint_image.ts";
import { TRANSFORM_IMAGE_SCHEMA } from "../tools/transform_image.ts";
import { UPSCALE_IMAGE_SCHEMA } from "../tools/upscale_image.ts";

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

/** Every optional property of a hand-written schema: `anyOf` with null, default null, a title. */
function assertOptionalStyle(schema: {
  properties: Record<string, Record<string, unknown>>;
  required: readonly string[];
}) {
  for (const [name, p] of Object.entries(schema.properties)) {
    assert.ok(typeof p.title === "string" && p.title.length > 0, `${name} has a title`);
    if (schema.required.includes(name)) continue;
    const anyOf = p.anyOf as Array<Record<string, unknown>>;
    assert.deepEqual(anyOf.at(-1), { type: "null" }, `${name}: anyOf ends with null`);
    assert.equal(p.default, null, `${name}: default null`);
  }
}

Deno.test("transform_image and upscale_image: hand-written schemas in the source's style", async (t) => {
  for (const schema of [TRANSFORM_IMAGE_SCHEMA, UPSCALE_IMAGE_SCHEMA]) {
    assertOptionalStyle(schema as unknown as Parameters<typeof assertOptionalStyle>[0]);
  }
  assert.equal(TRANSFORM_IMAGE_SCHEMA.title, "transform_imageArguments");
  assert.equal(UPSCALE_IMAGE_SCHEMA.title, "upscale_imageArguments");
  // The shared fields are the source's own fragments.
  assert.deepEqual(TRANSFORM_IMAGE_SCHEMA.properties.size, source.generate_image.properties.size);
  assert.deepEqual(
    TRANSFORM_IMAGE_SCHEMA.properties.negative_prompt,
    source.generate_image.properties.negative_prompt,
  );
  assert.deepEqual(TRANSFORM_IMAGE_SCHEMA.required, ["positive_prompt", "input_image"]);
  assert.deepEqual(UPSCALE_IMAGE_SCHEMA.required, ["input_image"]);
  await t.assertSnapshot({
    transform_image: TRANSFORM_IMAGE_SCHEMA,
    upscale_image: UPSCALE_IMAGE_SCHEMA,
  });
});
