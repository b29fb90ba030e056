import { deepStrictEqual, strictEqual, throws } from "node:assert";
import { decodeSimcc, mapToImage } from "./simcc.ts";

/** simcc rows of N×K×W with one peak (index, value) per row, zeros elsewhere. */
function rows(n: number, k: number, w: number, peaks: Array<[number, number]>): Float32Array {
  const data = new Float32Array(n * k * w);
  peaks.forEach(([i, v], r) => (data[r * w + i] = v));
  return data;
}

Deno.test("SimCC: argmax per axis, score = min of the maxima, /2 split ratio", () => {
  const x = rows(2, 2, 8, [[6, 0.9], [3, 0.4], [0, 0.7], [7, 0.2]]);
  const y = rows(2, 2, 10, [[9, 0.8], [4, 0.6], [5, 0.1], [2, 0.3]]);
  const r = decodeSimcc({ data: x, dims: [2, 2, 8] }, { data: y, dims: [2, 2, 10] });
  deepStrictEqual([r.instances, r.keypoints], [2, 2]);
  deepStrictEqual([...r.locations], [3, 4.5, 1.5, 2, 0, 2.5, 3.5, 1]);
  deepStrictEqual([...r.scores], [0.8, 0.4, 0.1, 0.2].map(Math.fround));
});

Deno.test("SimCC: score <= 0 sets both locations to -1 before the division; first max wins", () => {
  const x = new Float32Array([0, -0.5, -0.1, -0.2, /* row 2 */ 0.3, 0.5, 0.5, 0.1]);
  const y = new Float32Array([0.2, 0.9, 0, 0, /* row 2 */ 0.7, 0.7, 0, 0]);
  const r = decodeSimcc({ data: x, dims: [1, 2, 4] }, { data: y, dims: [1, 2, 4] });
  // Row 1: max_x = 0 (index 0) → score 0 → locations -1 / 2.
  deepStrictEqual([...r.locations.subarray(0, 2)], [-0.5, -0.5]);
  strictEqual(r.scores[0], 0);
  // Row 2: ties → first index (1 for x, 0 for y).
  deepStrictEqual([...r.locations.subarray(2, 4)], [0.5, 0]);
  throws(
    () => decodeSimcc({ data: x, dims: [1, 2, 4] }, { data: y, dims: [2, 1, 4] }),
    RangeError,
  );
});

Deno.test("SimCC back-mapping: kp / input_size · scale + center − scale / 2", () => {
  const x = rows(1, 1, 576, [[288, 1]]); // crop x = 144 (centre)
  const y = rows(1, 1, 768, [[0, 1]]); // crop y = 0 (top)
  const r = decodeSimcc({ data: x, dims: [1, 1, 576] }, { data: y, dims: [1, 1, 768] });
  const box = { cx: 200, cy: 250, w: 375, h: 500 };
  // x: 144/288·375 + 200 − 187.5 = 200; y: 0 + 250 − 250 = 0.
  deepStrictEqual(mapToImage(r, 0, box, { width: 288, height: 384 }), [[200, 0]]);
});
