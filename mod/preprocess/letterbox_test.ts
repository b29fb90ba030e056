import { deepStrictEqual, strictEqual } from "node:assert";
import { letterbox, PAD_VALUE } from "./letterbox.ts";
import type { RgbImage } from "../pipeline/types.ts";

function solid(width: number, height: number, rgb: [number, number, number]): RgbImage {
  const data = new Uint8Array(width * height * 3);
  for (let i = 0; i < data.length; i += 3) data.set(rgb, i);
  return { width, height, data };
}

Deno.test("letterbox 512x384: r = min(640/384, 640/512) = 1.25, image 640x480 top-left, pad 114", () => {
  const out = letterbox(solid(512, 384, [10, 20, 30]));
  strictEqual(out.ratio, 1.25);
  deepStrictEqual([out.resizedWidth, out.resizedHeight], [640, 480]);
  deepStrictEqual(out.tensor.dims, [1, 3, 640, 640]);
  const plane = 640 * 640;
  const at = (c: number, x: number, y: number) => out.tensor.data[c * plane + y * 640 + x];
  // CHW, RGB order, raw 0..255 values (no normalisation).
  deepStrictEqual([at(0, 0, 0), at(1, 0, 0), at(2, 0, 0)], [10, 20, 30]);
  deepStrictEqual([at(0, 639, 479), at(1, 639, 479), at(2, 639, 479)], [10, 20, 30]);
  // Rows 480..639 are padding.
  for (const c of [0, 1, 2]) {
    strictEqual(at(c, 0, 480), PAD_VALUE);
    strictEqual(at(c, 639, 639), PAD_VALUE);
  }
  strictEqual(PAD_VALUE, 114);
});

Deno.test("letterbox portrait 300x500: r = 1.28, 384x640 with padding on the right", () => {
  const out = letterbox(solid(300, 500, [200, 100, 0]));
  strictEqual(out.ratio, 640 / 500);
  deepStrictEqual([out.resizedWidth, out.resizedHeight], [384, 640]);
  const plane = 640 * 640;
  strictEqual(out.tensor.data[383], 200); // last image column, R plane
  strictEqual(out.tensor.data[384], 114); // first padding column
  strictEqual(out.tensor.data[plane + 639 * 640 + 100], 100); // G plane, last row
});

Deno.test("letterbox keeps pixel positions: a marked pixel lands at round-trip position x·r", () => {
  // 320x320 → r = 2, exact 2x upscale: pixel (10, 20) covers (20..21, 40..41).
  const img = solid(320, 320, [0, 0, 0]);
  img.data.set([255, 255, 255], (20 * 320 + 10) * 3);
  const out = letterbox(img);
  strictEqual(out.ratio, 2);
  const v = (x: number, y: number) => out.tensor.data[y * 640 + x];
  strictEqual(v(20, 40) > 0 && v(21, 41) > 0, true);
  strictEqual(v(17, 40), 0);
  strictEqual(v(24, 44), 0);
});
