import assert from "node:assert/strict";
import { checkImageRequest, REQUEST_MODES, RequestCheckError } from "./request_check.ts";
import type { ImageRequest } from "./request.ts";

const RULES = { maxCount: 3 };
const rgb = (width: number, height: number) => ({
  width,
  height,
  data: new Uint8Array(width * height * 3),
});
const mask = (width: number, height: number, fill = 1) => ({
  width,
  height,
  data: new Uint8Array(width * height).fill(fill),
});

const base = {
  positive: "a lighthouse",
  negative: "",
  size: "landscape_512" as const,
  name: null,
  seeds: [1],
  receivedAt: 1_700_000_000_000,
};

/** One valid request of every mode: what the tools make. */
const VALID: { [M in ImageRequest["mode"]]: ImageRequest } = {
  text_to_image: { ...base, tool: "generate_image", mode: "text_to_image", seeds: [1, 2, 3] },
  guided_image: {
    ...base,
    tool: "generate_guided_image",
    mode: "guided_image",
    controlMode: "openpose_full",
    image: rgb(512, 384),
  },
  inpaint_image: {
    ...base,
    tool: "inpaint_image",
    mode: "inpaint_image",
    image: rgb(512, 384),
    mask: mask(512, 384),
  },
  image_to_image: {
    ...base,
    tool: "transform_image",
    mode: "image_to_image",
    image: rgb(512, 384),
    change: "strong",
  },
  upscale_image: {
    ...base,
    positive: "",
    size: "landscape_1024",
    tool: "upscale_image",
    mode: "upscale_image",
    image: rgb(1024, 768),
  },
};

function refused(value: unknown): string {
  try {
    checkImageRequest(value, RULES);
  } catch (error) {
    assert.ok(error instanceof RequestCheckError, String(error));
    assert.match(error.message, /^the stored request of this job is not one the tools make/);
    return error.problems.join("; ");
  }
  throw new Error(`accepted: ${JSON.stringify(value).slice(0, 200)}`);
}

Deno.test("every mode has a row, and what the tools make passes unchanged", () => {
  assert.deepEqual(Object.keys(REQUEST_MODES).sort(), Object.keys(VALID).sort());
  for (const request of Object.values(VALID)) {
    assert.deepEqual(checkImageRequest(request, RULES), request);
  }
  assert.deepEqual(
    checkImageRequest({ ...VALID.text_to_image, name: "my-cat_2" }, RULES),
    { ...VALID.text_to_image, name: "my-cat_2" },
  );
});

Deno.test("a stored request is checked field by field, as strictly as the tools check arguments", () => {
  const text = VALID.text_to_image;
  const cases: Array<[string, unknown, RegExp]> = [
    ["a path in name", { ...text, name: "../../x" }, /^name: "\.\.\/\.\.\/x" is not a cleaned/],
    ["a slash in name", { ...text, name: "a/b" }, /^name: .* not a cleaned file label/],
    ["a long name", { ...text, name: "a".repeat(65) }, /^name: /],
    ["an empty prompt", { ...text, positive: "  " }, /^positive: must not be empty/],
    ["a long prompt", { ...text, positive: "a".repeat(10_001) }, /^positive: .*limit is 10000/],
    ["a long negative", { ...text, negative: "b".repeat(10_001) }, /^negative: .*10000/],
    ["an unknown size", { ...text, size: "square_1024" }, /^size: /],
    ["no seeds", { ...text, seeds: [] }, /^seeds: must hold at least one seed/],
    ["a negative seed", { ...text, seeds: [-1] }, /^seeds\.0: must be 0 or more/],
    ["a huge seed", { ...text, seeds: [2 ** 32] }, /^seeds\.0: must be at most 4294967295/],
    ["a fractional seed", { ...text, seeds: [1.5] }, /^seeds\.0: must be a whole number/],
    [
      "a batch over max_count",
      { ...text, seeds: [1, 2, 3, 4] },
      /at most 3 \(generation\.max_count\)/,
    ],
    [
      "another tool for the mode",
      { ...text, tool: "inpaint_image" },
      /^tool: must be "generate_image"/,
    ],
    ["an unknown mode", { ...text, mode: "upscale_all" }, /^mode: "upscale_all" is not one of/],
    ["an extra field", { ...text, path: "/etc" }, /unknown field "path"/],
    ["no time", { ...text, receivedAt: Infinity }, /^receivedAt: /],
    ["not an object", "gen", /^mode: undefined/],
    [
      "a batch of a guided call",
      { ...VALID.guided_image, seeds: [1, 2] },
      /generate_guided_image makes at most 1/,
    ],
    ["an unknown control mode", { ...VALID.guided_image, controlMode: "canny" }, /^controlMode: /],
    [
      "an image of another size",
      { ...VALID.guided_image, image: rgb(512, 512) },
      /^image: is 512x512, but size landscape_512 is 512x384/,
    ],
    [
      "short pixel data",
      { ...VALID.guided_image, image: { ...rgb(512, 384), data: new Uint8Array(10) } },
      /^image\.data: has 10 bytes, not 589824/,
    ],
    [
      "pixels that are not bytes",
      { ...VALID.guided_image, image: { ...rgb(512, 384), data: [1] } },
      /^image\.data: must be bytes/,
    ],
    [
      "a mask of another size",
      { ...VALID.inpaint_image, mask: mask(384, 512) },
      /^mask: is 384x512/,
    ],
    [
      "a mask with other values",
      { ...VALID.inpaint_image, mask: mask(512, 384, 7) },
      /only 0 \(keep\) and 1/,
    ],
    [
      "an empty mask",
      { ...VALID.inpaint_image, mask: mask(512, 384, 0) },
      /no pixel to regenerate/,
    ],
    ["a guided call without its image", { ...VALID.guided_image, image: undefined }, /^image: /],
  ];
  for (const [what, value, pattern] of cases) assert.match(refused(value), pattern, what);
  // Every problem is named, not only the first.
  assert.match(
    refused({ ...text, name: "../x", size: "big" }),
    /size: .*; name: |name: .*; size: /,
  );
});

Deno.test("image-to-image and upscale rows are checked by their tools' rules", () => {
  const transform = VALID.image_to_image;
  const upscale = VALID.upscale_image;
  const cases: Array<[string, unknown, RegExp]> = [
    ["an unknown change", { ...transform, change: "total" }, /^change: /],
    ["no change", { ...transform, change: undefined }, /^change: /],
    ["a transform at an upscale size", { ...transform, size: "square_1024" }, /^size: .*512/],
    [
      "a transform image off its size",
      { ...transform, image: rgb(512, 512) },
      /^image: is 512x512/,
    ],
    ["an empty transform prompt", { ...transform, positive: "" }, /^positive: must not be empty/],
    [
      "an upscale at a 512 size",
      { ...upscale, size: "square_512", image: rgb(512, 512) },
      /^size: /,
    ],
    ["an upscale image not enlarged", { ...upscale, image: rgb(512, 384) }, /^image: is 512x384/],
    ["an upscale batch", { ...upscale, seeds: [1, 2] }, /^seeds: 2 images.*at most 1/],
    ["a long upscale prompt", { ...upscale, positive: "a".repeat(10_001) }, /^positive: .*10000/],
    ["a change on an upscale", { ...upscale, change: "subtle" }, /unknown field "change"/],
  ];
  for (const [label, value, pattern] of cases) assert.match(refused(value), pattern, label);
});
