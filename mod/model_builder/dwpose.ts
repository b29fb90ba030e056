/**
 * A tiny whole-body pose model with the DWPose contract of
 * `dw-ll_ucoco_384.onnx` (yzd-v/DWPose; comfyui_controlnet_aux
 * `cv_ox_pose.py`): `input [N,3,384,288]` (ImageNet
 * mean/std normalized crops) → SimCC `simcc_x [N,133,576]`,
 * `simcc_y [N,133,768]` (2× the input width/height).
 *
 * Per crop it finds the bounding box of the bright pixels (channel mean above
 * 0.5 after normalization) and places the 133 COCO-WholeBody keypoints of a
 * standing, front-facing figure template inside it; each keypoint is a
 * Gaussian peak (σ = 3 bins) of height 0.9 at bin 2·x (2·y). A crop with no
 * bright pixel gets peaks of 0.045 (below the 0.3 visibility threshold) at the
 * template placed in the middle of the crop.
 *
 * @module
 */

import type { EncodedModel } from "../graph/graph.ts";
import { Layers, OPSET } from "../graph/layers.ts";
import { Rng } from "../graph/rng.ts";

/** Input height and width (w×h = 288×384). */
export const DWPOSE_INPUT = { height: 384, width: 288 } as const;
/** COCO-WholeBody keypoint count. */
export const DWPOSE_KEYPOINTS = 133;
/** SimCC split ratio (bins per pixel). */
export const SIMCC_RATIO = 2;
/** Peak height of a visible keypoint. */
export const DWPOSE_PEAK = 0.9;

const BIG = 1e4;

/**
 * Template keypoints as (u, v) fractions of the person box, COCO-WholeBody
 * order: 0-16 body (nose, l/r eye, l/r ear, l/r shoulder, l/r elbow, l/r wrist,
 * l/r hip, l/r knee, l/r ankle; "left" = the person's left = image right),
 * 17-22 feet, 23-90 face (68), 91-111 left hand, 112-132 right hand.
 */
export function poseTemplate(): Array<[number, number]> {
  const body: Array<[number, number]> = [
    [0.5, 0.08],
    [0.54, 0.06],
    [0.46, 0.06],
    [0.58, 0.07],
    [0.42, 0.07],
    [0.68, 0.2],
    [0.32, 0.2],
    [0.78, 0.35],
    [0.22, 0.35],
    [0.85, 0.48],
    [0.15, 0.48],
    [0.6, 0.52],
    [0.4, 0.52],
    [0.62, 0.72],
    [0.38, 0.72],
    [0.63, 0.92],
    [0.37, 0.92],
  ];
  const feet: Array<[number, number]> = [
    [0.66, 0.97],
    [0.69, 0.96],
    [0.62, 0.95],
    [0.34, 0.97],
    [0.31, 0.96],
    [0.38, 0.95],
  ];
  const face = Array.from({ length: 68 }, (_, j): [number, number] => {
    const a = (2 * Math.PI * j) / 68;
    return [0.5 + 0.06 * Math.cos(a), 0.085 + 0.05 * Math.sin(a)];
  });
  const hand = (u: number, dir: number) =>
    Array.from({ length: 21 }, (_, j): [number, number] => {
      if (j === 0) return [u, 0.5];
      const finger = Math.floor((j - 1) / 4);
      const seg = (j - 1) % 4;
      return [u + dir * 0.012 * (finger - 2), 0.5 + 0.012 * (seg + 1)];
    });
  return [...body, ...feet, ...face, ...hand(0.86, 1), ...hand(0.14, -1)];
}

/** Builds the pose model (float32 I/O). */
export function buildDwposeModel(seed: number): EncodedModel {
  const L = new Layers("dwpose", new Rng(seed, "dwpose"));
  const g = L.g;
  const H = DWPOSE_INPUT.height;
  const W = DWPOSE_INPUT.width;
  const K = DWPOSE_KEYPOINTS;
  const x = L.input("input", "float32", ["batch", 3, H, W]);

  const gray = L.reduce("ReduceMean", x, [1], false); // [N,H,W]
  const bright = L.toFloat(g.op("Greater", [gray, g.constF([0.5], [])]));
  const colAny = L.reduce("ReduceMax", bright, [1], false); // [N,W]
  const rowAny = L.reduce("ReduceMax", bright, [2], false); // [N,H]
  const found = L.reduce("ReduceMax", colAny, [1], true); // [N,1]
  const notFound = L.sub(g.constF([1], []), found);
  const extent = (any: string, n: number, fallback: [number, number]): [string, string] => {
    const coords = g.init("coords", "float32", [n], Float32Array.from({ length: n }, (_, i) => i));
    const miss = L.scale(L.sub(g.constF([1], []), any), BIG);
    const lo = L.reduce("ReduceMin", L.add(coords, miss), [1], true); // [N,1]
    const hi = L.reduce("ReduceMax", L.sub(coords, miss), [1], true);
    // Without a bright pixel use the fallback box instead of ±BIG.
    const pick = (v: string, f: number) => L.add(L.mul(v, found), L.scale(notFound, f));
    return [pick(lo, fallback[0]), pick(hi, fallback[1])];
  };
  const [x0, x1] = extent(colAny, W, [W * 0.2, W * 0.8]);
  const [y0, y1] = extent(rowAny, H, [H * 0.1, H * 0.9]);

  const tpl = poseTemplate();
  const u = g.constF(tpl.map((p) => p[0]), [1, K]);
  const v = g.constF(tpl.map((p) => p[1]), [1, K]);
  const px = L.add(x0, L.mul(u, L.sub(x1, x0))); // [N,K]
  const py = L.add(y0, L.mul(v, L.sub(y1, y0)));
  const amp = L.unsqueeze(L.shift(L.scale(found, DWPOSE_PEAK - 0.045), 0.045), [2]); // [N,1,1]
  const sigma = 3;
  const peaks = (p: string, bins: number, name: string) => {
    const centre = L.unsqueeze(L.scale(p, SIMCC_RATIO), [2]); // [N,K,1]
    const grid = g.constF(Array.from({ length: bins }, (_, i) => i), [1, 1, bins]);
    const d = L.sub(grid, centre);
    const e = g.op("Exp", [L.scale(L.mul(d, d), -1 / (2 * sigma * sigma))]);
    g.output(L.mul(e, amp), name, "float32", ["batch", K, bins]);
  };
  peaks(px, W * SIMCC_RATIO, "simcc_x");
  peaks(py, H * SIMCC_RATIO, "simcc_y");
  return g.encode({ opset: OPSET, docString: "tiny DWPose-contract pose model (test fixture)" });
}
