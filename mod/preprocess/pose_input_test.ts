import { deepStrictEqual, strictEqual } from "node:assert";
import {
  bboxToCenterScale,
  fixAspectRatio,
  POSE_INPUT_SIZE,
  POSE_MEAN,
  POSE_STD,
  preparePoseBatch,
} from "./pose_input.ts";
import type { RgbImage } from "../pipeline/types.ts";

Deno.test("bbox_xyxy2cs: centre and 1.25 × size", () => {
  deepStrictEqual(bboxToCenterScale({ x1: 100, y1: 50, x2: 300, y2: 450, score: 1 }), {
    cx: 200,
    cy: 250,
    w: 250,
    h: 500,
  });
});

Deno.test("_fix_aspect_ratio widens to w/h = 0.75 (288/384)", () => {
  strictEqual(POSE_INPUT_SIZE.width / POSE_INPUT_SIZE.height, 0.75);
  // Tall box: w = 0.75·h.
  deepStrictEqual(fixAspectRatio({ cx: 0, cy: 0, w: 250, h: 500 }, 0.75), {
    cx: 0,
    cy: 0,
    w: 375,
    h: 500,
  });
  // Wide box: h = w / 0.75.
  deepStrictEqual(fixAspectRatio({ cx: 0, cy: 0, w: 300, h: 100 }, 0.75), {
    cx: 0,
    cy: 0,
    w: 300,
    h: 400,
  });
});

Deno.test("preparePoseBatch: NCHW batch, mean/std normalisation, black outside the image", () => {
  const w = 64;
  const h = 64;
  const data = new Uint8Array(w * h * 3);
  for (let i = 0; i < data.length; i += 3) data.set([200, 100, 50], i);
  const img: RgbImage = { width: w, height: h, data };
  // Box 0 well inside; box 1 hanging over the left edge.
  const batch = preparePoseBatch(img, [
    { x1: 16, y1: 8, x2: 48, y2: 56, score: 1 },
    { x1: -40, y1: 0, x2: 10, y2: 64, score: 1 },
  ]);
  deepStrictEqual(batch.tensor.dims, [2, 3, 384, 288]);
  const plane = 288 * 384;
  const at = (n: number, c: number, x: number, y: number) =>
    batch.tensor.data[(n * 3 + c) * plane + y * 288 + x];
  const norm = (v: number, c: number) => Math.fround((v - POSE_MEAN[c]) / POSE_STD[c]);
  // Centre of crop 0 is the box centre inside the image.
  for (const c of [0, 1, 2]) strictEqual(at(0, c, 144, 192), norm([200, 100, 50][c], c));
  // Crop 1: its left part maps outside the image → value of a black pixel.
  for (const c of [0, 1, 2]) strictEqual(at(1, c, 0, 192), norm(0, c));
  // Aspect-fixed boxes are reported for the keypoint mapping.
  deepStrictEqual(batch.boxes[0], { cx: 32, cy: 32, w: 45, h: 60 });
});
