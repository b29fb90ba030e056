import { deepStrictEqual, strictEqual, throws } from "node:assert";
import {
  resizeArea,
  resizeLanczos4,
  resizeLinear,
  resizeToResolution,
  resolutionSize,
} from "./resize.ts";
import type { RgbImage } from "../pipeline/types.ts";
import { countDiff, patternImage, readFixture, readJsonFixture } from "./test_support.ts";

interface KernelCase {
  op: string;
  src: [number, number];
  dst: [number, number];
  offset: number;
  length: number;
  matrix?: number[];
  center?: [number, number];
  scaleW?: number;
}
const fixture = readJsonFixture<{ opencv: string; cases: KernelCase[] }>("opencv_kernels.json");
const blob = readFixture("opencv_kernels.bin.gz");

function expected(c: KernelCase): Uint8Array {
  return blob.subarray(c.offset, c.offset + c.length);
}

const OPS: Record<string, (img: RgbImage, w: number, h: number) => RgbImage> = {
  linear: resizeLinear,
  lanczos4: resizeLanczos4,
  area: resizeArea,
};

for (const op of Object.keys(OPS)) {
  Deno.test(`resize ${op} is bit-exact with cv2.resize (OpenCV ${fixture.opencv})`, () => {
    const cases = fixture.cases.filter((c) => c.op === op);
    strictEqual(cases.length >= 3, true);
    for (const c of cases) {
      const out = OPS[op](patternImage(c.src[0], c.src[1]), c.dst[0], c.dst[1]);
      deepStrictEqual([out.width, out.height], c.dst);
      strictEqual(countDiff(out.data, expected(c)), 0, `${op} ${c.src} -> ${c.dst}`);
    }
  });
}

Deno.test("resize kernels keep a constant image constant and copy at equal size", () => {
  const flat: RgbImage = { width: 30, height: 20, data: new Uint8Array(30 * 20 * 3) };
  for (let i = 0; i < flat.data.length; i += 3) flat.data.set([200, 17, 90], i);
  for (const [w, h] of [[41, 27], [15, 10], [29, 19]]) {
    for (const f of [resizeLinear, resizeLanczos4]) {
      const out = f(flat, w, h);
      for (let i = 0; i < out.data.length; i += 3) {
        deepStrictEqual([...out.data.subarray(i, i + 3)], [200, 17, 90]);
      }
    }
  }
  const same = resizeLinear(flat, 30, 20);
  deepStrictEqual(same.data, flat.data);
  strictEqual(same.data === flat.data, false); // a copy, not the same buffer
});

Deno.test("resizeLinear: half-pixel centres on a 2-pixel ramp", () => {
  // 2x1 -> 4x1: centres map to x = -0.25, 0.25, 0.75, 1.25 → clamped weights
  // (1,0), (0.75,0.25), (0.25,0.75), (0,1) of [0, 200].
  const src: RgbImage = { width: 2, height: 1, data: new Uint8Array([0, 0, 0, 200, 200, 200]) };
  const out = resizeLinear(src, 4, 1);
  deepStrictEqual([out.data[0], out.data[3], out.data[6], out.data[9]], [0, 50, 150, 200]);
});

Deno.test("resize_image sizes: short side to 512, both sides rounded to multiples of 64", () => {
  deepStrictEqual(resolutionSize(512, 512, 512), { width: 512, height: 512 });
  deepStrictEqual(resolutionSize(512, 384, 512), { width: 704, height: 512 }); // 682.7 → 11·64
  deepStrictEqual(resolutionSize(384, 512, 512), { width: 512, height: 704 });
  deepStrictEqual(resolutionSize(1000, 600, 512), { width: 832, height: 512 }); // 853.3 → 13·64
  const up = resizeToResolution(patternImage(32, 24), 512);
  deepStrictEqual([up.width, up.height], [704, 512]);
  const down = resizeToResolution(patternImage(1024, 640), 512);
  deepStrictEqual([down.width, down.height], [832, 512]);
  throws(() => resizeArea(patternImage(10, 10), 12, 8), RangeError);
  throws(() => resizeLinear(patternImage(10, 10), 0, 8), RangeError);
});
