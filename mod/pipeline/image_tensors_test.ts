import { deepStrictEqual, strictEqual, throws } from "node:assert";
import {
  decodedToRgb,
  repeatBatch,
  rgbToNchw01,
  rgbToNchwSigned,
  roundHalfEven,
} from "./image_tensors.ts";

Deno.test("roundHalfEven: numpy's round, ties to even", () => {
  deepStrictEqual([0.5, 1.5, 2.5, 126.5, 127.5, 254.5, 3.4, 3.6].map(roundHalfEven), [
    0,
    2,
    2,
    126,
    128,
    254,
    3,
    4,
  ]);
});

Deno.test("decodedToRgb: clip(x/2+0.5) · 255, rounded, NCHW planes to interleaved RGB", () => {
  // 2×1 image; planes R, G, B of two pixels each.
  const sample = new Float32Array([
    -1,
    1, // R: 0 → 0, 1 → 255
    0,
    5, // G: 0.5·255 = 127.5 → 128 (even), 5 clips to 255
    -3,
    NaN, // B: clipped to 0; NaN → 0
  ]);
  const img = decodedToRgb(sample, 2, 1);
  strictEqual(img.width, 2);
  strictEqual(img.height, 1);
  deepStrictEqual(Array.from(img.data), [0, 128, 0, 255, 255, 0]);
  throws(() => decodedToRgb(new Float32Array(5), 2, 1), /expected 3×1×2 = 6 values, got 5/);
});

Deno.test("rgbToNchw01: x/255 in planes; masked pixels are −1 on every channel", () => {
  const image = { width: 2, height: 1, data: new Uint8Array([255, 0, 51, 102, 204, 0]) };
  const plain = rgbToNchw01(image);
  deepStrictEqual(Array.from(plain), [1, 102 / 255, 0, 204 / 255, 51 / 255, 0].map(Math.fround));
  const masked = rgbToNchw01(image, { width: 2, height: 1, data: new Uint8Array([0, 1]) });
  deepStrictEqual(Array.from(masked), [1, -1, 0, -1, 51 / 255, -1].map(Math.fround));
  throws(
    () => rgbToNchw01(image, { width: 1, height: 1, data: new Uint8Array([0]) }),
    /mask is 1×1/,
  );
});

Deno.test("rgbToNchwSigned: 2·(x/255) − 1", () => {
  const image = { width: 1, height: 1, data: new Uint8Array([0, 255, 51]) };
  deepStrictEqual(Array.from(rgbToNchwSigned(image)), [
    -1,
    1,
    Math.fround(2 * Math.fround(0.2) - 1),
  ]);
});

Deno.test("repeatBatch: concatenates copies along the batch axis", () => {
  deepStrictEqual(Array.from(repeatBatch(new Float32Array([1, 2]), 2)), [1, 2, 1, 2]);
});
