import { deepStrictEqual, strictEqual, throws } from "node:assert";
import { type Affine, getAffineTransform, invertAffine } from "./affine.ts";
import { getWarpMatrix } from "./pose_input.ts";
import { warpAffineLinear } from "./warp_affine.ts";
import { countDiff, patternImage, readFixture, readJsonFixture } from "./test_support.ts";

interface WarpCase {
  op: string;
  src: [number, number];
  dst: [number, number];
  offset: number;
  length: number;
  matrix: number[];
  center: [number, number];
  scaleW: number;
}
const fixture = readJsonFixture<{ cases: WarpCase[] }>("opencv_kernels.json");
const blob = readFixture("opencv_kernels.bin.gz");
const warps = fixture.cases.filter((c) => c.op === "warp");

function close(a: number, b: number, tol: number): boolean {
  return Math.abs(a - b) <= tol * Math.max(1, Math.abs(a), Math.abs(b));
}

Deno.test("getAffineTransform solves scale + translation exactly", () => {
  // x' = 2x + 5, y' = 3y - 1 through three points.
  const src = [{ x: 0, y: 0 }, { x: 1, y: 0 }, { x: 0, y: 1 }];
  const dst = src.map((p) => ({ x: 2 * p.x + 5, y: 3 * p.y - 1 }));
  deepStrictEqual(getAffineTransform(src, dst), [2, 0, 5, 0, 3, -1]);
  throws(
    () => getAffineTransform([{ x: 0, y: 0 }, { x: 1, y: 1 }, { x: 2, y: 2 }], dst),
    RangeError,
  );
});

Deno.test("invertAffine gives the inverse map", () => {
  const m: Affine = [2, 0.5, 3, -1, 4, 7];
  const inv = invertAffine(m);
  for (const [x, y] of [[0, 0], [3, -2], [10.5, 4.25]]) {
    const u = m[0] * x + m[1] * y + m[2];
    const v = m[3] * x + m[4] * y + m[5];
    strictEqual(close(inv[0] * u + inv[1] * v + inv[2], x, 1e-12), true);
    strictEqual(close(inv[3] * u + inv[4] * v + inv[5], y, 1e-12), true);
  }
});

Deno.test("mmpose get_warp_matrix: centre to crop centre, scale outW / w (hand-derived)", () => {
  // rot = 0: M = [[k, 0, outW/2 - k·cx], [0, k, outH/2 - k·cy]] with k = outW / w.
  const cs = { cx: 200, cy: 250, w: 375, h: 500 };
  const m = getWarpMatrix(cs, 288, 384);
  const k = 288 / 375;
  const want = [k, 0, 144 - k * 200, 0, k, 192 - k * 250];
  m.forEach((v, i) =>
    strictEqual(close(v, want[i], 1e-9), true, `M[${i}] = ${v}, want ${want[i]}`)
  );
});

Deno.test("getWarpMatrix matches cv2.getAffineTransform on mmpose's float32 points", () => {
  strictEqual(warps.length, 3);
  for (const c of warps) {
    const m = getWarpMatrix({ cx: c.center[0], cy: c.center[1], w: c.scaleW, h: 0 }, 36, 48);
    // OpenCV may solve with LAPACK; the matrices agree to the last bits.
    m.forEach((v, i) => strictEqual(close(v, c.matrix[i], 1e-13), true, `${v} vs ${c.matrix[i]}`));
  }
});

Deno.test("warpAffineLinear is bit-exact with cv2.warpAffine INTER_LINEAR", () => {
  for (const c of warps) {
    const out = warpAffineLinear(patternImage(c.src[0], c.src[1]), c.matrix as Affine, 36, 48);
    strictEqual(countDiff(out.data, blob.subarray(c.offset, c.offset + c.length)), 0);
  }
});

Deno.test("warpAffineLinear: identity copies, outside is black, shift by one moves pixels", () => {
  const img = patternImage(8, 6);
  deepStrictEqual(warpAffineLinear(img, [1, 0, 0, 0, 1, 0], 8, 6).data, img.data);
  const shifted = warpAffineLinear(img, [1, 0, 1, 0, 1, 0], 8, 6); // dst(x) = src(x - 1)
  for (let y = 0; y < 6; y++) {
    deepStrictEqual([...shifted.data.subarray(y * 24, y * 24 + 3)], [0, 0, 0]);
    deepStrictEqual(
      shifted.data.subarray(y * 24 + 3, y * 24 + 24),
      img.data.subarray(y * 24, y * 24 + 21),
    );
  }
});
