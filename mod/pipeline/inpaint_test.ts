import { deepStrictEqual, strictEqual, throws } from "node:assert";
import { blendKnownLatents, latentMask, pasteUnmasked } from "./inpaint.ts";

Deno.test("latentMask: nearest neighbour by 8 samples pixel (8y, 8x), as F.interpolate 'nearest'", () => {
  const width = 32;
  const height = 16;
  const data = new Uint8Array(width * height);
  data[8 * width + 16] = 1; // pixel (x=16, y=8) → latent (x=2, y=1)
  data[9 * width + 25] = 1; // pixel (x=25, y=9) is not a sampled pixel
  const m = latentMask({ width, height, data }, 4, 2);
  const expected = new Uint8Array(8);
  expected[1 * 4 + 2] = 1;
  deepStrictEqual(m, expected);
});

Deno.test("blendKnownLatents: kept positions (mask 0) take the known latents on every channel", () => {
  const latents = new Float32Array([1, 2, 3, 4]); // 2 channels × 2 positions
  const known = new Float32Array([10, 20, 30, 40]);
  const out = blendKnownLatents(latents, known, new Uint8Array([1, 0]));
  deepStrictEqual(Array.from(out), [1, 20, 3, 40]);
  throws(
    () => blendKnownLatents(new Float32Array(4), new Float32Array(3), new Uint8Array(2)),
    /do not match/,
  );
});

Deno.test("pasteUnmasked: unmasked pixels come from the original, masked ones stay", () => {
  const generated = { width: 2, height: 1, data: new Uint8Array([1, 2, 3, 4, 5, 6]) };
  const original = { width: 2, height: 1, data: new Uint8Array([9, 9, 9, 8, 8, 8]) };
  const out = pasteUnmasked(generated, original, {
    width: 2,
    height: 1,
    data: new Uint8Array([1, 0]),
  });
  deepStrictEqual(Array.from(out.data), [1, 2, 3, 8, 8, 8]);
  strictEqual(generated.data[3], 4, "the input is not modified");
});
