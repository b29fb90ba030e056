import { deepStrictEqual, strictEqual, throws } from "node:assert";
import { multiclassNms, nms } from "./nms.ts";

// Legacy +1 convention: box [0,0,9,9] has area 10·10 = 100.
const BOXES = new Float32Array([
  0,
  0,
  9,
  9, // a
  5,
  0,
  14,
  9, // b: overlap with a = 5·10 = 50, IoU 50/150 = 0.33 → kept
  1,
  1,
  10,
  10, // c: overlap with a = 9·9 = 81, IoU 81/119 = 0.68 → suppressed by a
  100,
  100,
  109,
  109, // d: disjoint
]);

Deno.test("nms keeps by descending score and drops IoU > 0.45 (with the +1 area rule)", () => {
  deepStrictEqual(nms(BOXES, new Float32Array([0.9, 0.8, 0.7, 0.6]), 0.45), [0, 1, 3]);
  // c scoring highest suppresses a (IoU 0.68) but not b (overlap 6·9 = 54 → 54/146 = 0.37).
  deepStrictEqual(nms(BOXES, new Float32Array([0.5, 0.8, 0.9, 0.6]), 0.45), [2, 1, 3]);
  // Threshold between 0.33 and 0.68: b survives at 0.34, not at 0.33.
  deepStrictEqual(nms(BOXES.subarray(0, 8), new Float32Array([0.9, 0.8]), 0.34), [0, 1]);
  deepStrictEqual(nms(BOXES.subarray(0, 8), new Float32Array([0.9, 0.8]), 0.33), [0]);
  throws(() => nms(BOXES, new Float32Array([1]), 0.5), RangeError);
});

Deno.test("nms breaks score ties toward the higher index (argsort()[::-1])", () => {
  const two = new Float32Array([0, 0, 9, 9, 0, 0, 9, 9]);
  deepStrictEqual(nms(two, new Float32Array([0.5, 0.5]), 0.45), [1]);
});

Deno.test("multiclassNms is class-aware and applies score > threshold per class", () => {
  // Two identical boxes; class 0 scores (0.9, 0.8), class 1 scores (0.05, 0.7).
  const boxes = new Float32Array([0, 0, 9, 9, 0, 0, 9, 9]);
  const scores = new Float32Array([0.9, 0.05, 0.8, 0.7]);
  const dets = multiclassNms(boxes, scores, 2, 0.45, 0.1);
  deepStrictEqual(dets.map((d) => [d.classIndex, d.score]), [
    [0, Math.fround(0.9)],
    [1, Math.fround(0.7)],
  ]);
  // Limiting to class 0 yields the class-0 part unchanged.
  deepStrictEqual(multiclassNms(boxes, scores, 2, 0.45, 0.1, [0]), dets.slice(0, 1));
  // score_thr is strict: exactly 0.1 is dropped.
  strictEqual(multiclassNms(boxes, new Float32Array([0.1, 0, 0.1, 0]), 2, 0.45, 0.1).length, 0);
});
