import { deepStrictEqual, strictEqual, throws } from "node:assert";
import { anchorCount, demoPostprocess, detectPersons } from "./yolox.ts";

const C = 85;
const N = 8400;

/** Index of grid cell (gx, gy) at `stride` for a 640 input. */
function anchor(stride: number, gx: number, gy: number): number {
  if (stride === 8) return gy * 80 + gx;
  if (stride === 16) return 6400 + gy * 40 + gx;
  return 6400 + 1600 + gy * 20 + gx;
}

/** Raw prediction that decodes to the letterboxed box (cx, cy, w, h). */
function setBox(
  raw: Float32Array,
  stride: number,
  gx: number,
  gy: number,
  box: [number, number, number, number],
  obj: number,
  cls: Record<number, number>,
): void {
  const o = anchor(stride, gx, gy) * C;
  raw[o] = box[0] / stride - gx;
  raw[o + 1] = box[1] / stride - gy;
  raw[o + 2] = Math.log(box[2] / stride);
  raw[o + 3] = Math.log(box[3] / stride);
  raw[o + 4] = obj;
  for (const [k, v] of Object.entries(cls)) raw[o + 5 + Number(k)] = v;
}

Deno.test("anchor grid of a 640 input: 80² + 40² + 20² = 8400", () => {
  strictEqual(anchorCount(640), 8400);
  strictEqual(anchorCount(320), 2100);
});

Deno.test("demo_postprocess: xy = (xy + grid)·stride, wh = exp(wh)·stride, row-major grids", () => {
  const raw = new Float32Array(N * C);
  // stride 8, cell (3, 5): (0.5 + 3)·8 = 28, (0.25 + 5)·8 = 42, e^ln2·8 = 16, e^0·8 = 8.
  let o = anchor(8, 3, 5) * C;
  raw.set([0.5, 0.25, Math.log(2), 0], o);
  const out = demoPostprocess(raw, C, 640);
  deepStrictEqual([...out.subarray(o, o + 4)].map((v) => +v.toFixed(4)), [28, 42, 16, 8]);
  // First stride-16 cell is anchor 6400 with grid (0, 0); last stride-32 cell is (19, 19).
  o = anchor(16, 0, 0) * C;
  raw.set([1, 1, 0, 0], o);
  o = (N - 1) * C;
  raw.set([0, 0, 0, 0], o);
  const out2 = demoPostprocess(raw, C, 640);
  deepStrictEqual([...out2.subarray(6400 * C, 6400 * C + 4)], [16, 16, 16, 16]);
  deepStrictEqual([...out2.subarray(o, o + 4)], [19 * 32, 19 * 32, 32, 32]);
  throws(() => demoPostprocess(new Float32Array(10), C, 640), RangeError);
});

Deno.test("detectPersons: decode, /ratio, obj·cls, NMS 0.45, class 0 with score > 0.3", () => {
  const raw = new Float32Array(N * C);
  const ratio = 1.25;
  // Person A in image pixels (100, 50)-(300, 450) → letterboxed ×1.25: centre (250, 312.5), size 250×500.
  setBox(raw, 32, 7, 9, [250, 312.5, 250, 500], 0.9, { 0: 0.95 }); // score 0.855
  // A shifted duplicate of A with a lower score: IoU ≈ 0.9 → suppressed.
  setBox(raw, 32, 8, 9, [260, 312.5, 250, 500], 0.8, { 0: 0.9 });
  // Person B, disjoint: (420, 100)-(500, 300) → ×1.25 centre (575, 250), 100×250.
  setBox(raw, 16, 35, 15, [575, 250, 100, 250], 0.7, { 0: 0.6 }); // 0.42
  // A weak person (0.5·0.5 = 0.25 ≤ 0.3) and a confident non-person (class 2).
  setBox(raw, 8, 10, 10, [84, 84, 40, 80], 0.5, { 0: 0.5 });
  setBox(raw, 8, 60, 60, [484, 484, 40, 40], 0.99, { 2: 0.99 });
  const boxes = detectPersons({ data: raw, dims: [1, N, C] }, ratio, 640);
  strictEqual(boxes.length, 2);
  const near = (a: number, b: number) => Math.abs(a - b) < 1e-3;
  const [a, b] = boxes;
  strictEqual(near(a.x1, 100) && near(a.y1, 50) && near(a.x2, 300) && near(a.y2, 450), true);
  strictEqual(near(a.score, 0.855), true);
  strictEqual(near(b.x1, 420) && near(b.y1, 100) && near(b.x2, 500) && near(b.y2, 300), true);
  strictEqual(near(b.score, 0.42), true);
});

Deno.test("detectPersons: nobody above 0.3 gives no boxes; wrong shape throws", () => {
  const raw = new Float32Array(N * C);
  strictEqual(detectPersons({ data: raw, dims: [1, N, C] }, 1, 640).length, 0);
  throws(() => detectPersons({ data: raw, dims: [1, N - 1, C] }, 1, 640), RangeError);
  deepStrictEqual(detectPersons({ data: new Float32Array(N * 6), dims: [1, N, 6] }, 1, 640), []);
});
