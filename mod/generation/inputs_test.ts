import assert from "node:assert/strict";
import { z } from "zod";
import { joinPrompts, MAX_PROMPT_CHARS, negativePrompt, positivePrompt, size } from "./inputs.ts";

const messages = (schema: z.ZodType, value: unknown) => {
  const r = schema.safeParse(value);
  assert.equal(r.success, false, `expected ${JSON.stringify(value)?.slice(0, 40)} to be refused`);
  return r.error!.issues.map((i) => i.message).join("; ");
};

Deno.test("positive_prompt: required, non-empty after trimming, at most 10,000 characters", () => {
  assert.match(messages(positivePrompt, undefined), /required/);
  assert.match(messages(positivePrompt, null), /must be a string, got null/);
  assert.match(messages(positivePrompt, 5), /must be a string, got number/);
  assert.match(messages(positivePrompt, "   \n\t "), /must not be empty or only whitespace/);
  assert.match(
    messages(positivePrompt, "a".repeat(10_001)),
    /10001 characters long; the limit is 10000/,
  );
  assert.equal(positivePrompt.parse("a".repeat(MAX_PROMPT_CHARS)).length, MAX_PROMPT_CHARS);
  // Characters are code points: 10,000 emoji (20,000 UTF-16 units) are allowed.
  assert.equal(positivePrompt.parse("🐱".repeat(10_000)).length, 20_000);
  assert.equal(positivePrompt.parse("  a cat  "), "  a cat  ");
});

Deno.test("negative_prompt: missing or null means empty; at most 10,000 characters", () => {
  assert.equal(negativePrompt.parse(undefined), "");
  assert.equal(negativePrompt.parse(null), "");
  assert.equal(negativePrompt.parse("blurry"), "blurry");
  assert.match(messages(negativePrompt, 3), /must be a string or null, got number/);
  assert.match(messages(negativePrompt, "b".repeat(10_001)), /limit is 10000/);
});

Deno.test("size: the three ids, or null/missing for the default", () => {
  assert.equal(size.parse(undefined), null);
  assert.equal(size.parse(null), null);
  for (const id of ["square_512", "landscape_512", "portrait_512"]) {
    assert.equal(size.parse(id), id);
  }
  assert.match(
    messages(size, "square_1024"),
    /must be one of "square_512", "landscape_512", "portrait_512" or null, got "square_1024"/,
  );
});

Deno.test("base prompts are joined as '<base>, <user>' and '<base>\\n<user>'", () => {
  assert.deepEqual(
    joinPrompts({ positive: "masterpiece", negative: "lowres" }, "a cat", "blurry"),
    { positive: "masterpiece, a cat", negative: "lowres\nblurry" },
  );
  assert.deepEqual(joinPrompts({ positive: "", negative: "" }, "a cat", ""), {
    positive: "a cat",
    negative: "",
  });
  assert.deepEqual(joinPrompts({ positive: "base", negative: "neg" }, "a cat", ""), {
    positive: "base, a cat",
    negative: "neg",
  });
});
