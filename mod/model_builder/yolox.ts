/**
 * A tiny detector with the YOLOX contract of `yolox_l.onnx` (yzd-v/DWPose;
 * comfyui_controlnet_aux `cv_ox_det.py`): `images [1,3,640,640]`
 * (letterboxed RGB 0..255, pad 114, not
 * normalized) → `output [1,8400,85]` in raw YOLOX format, i.e. before
 * `demo_postprocess`: per anchor (80², 40², 20² grid cells at strides 8, 16,
 * 32, row-major) `x, y` offsets in cells, `log(w/stride), log(h/stride)`,
 * objectness and 80 class probabilities.
 *
 * It "detects" the bounding box of the pixels brighter than 127.5 (mean over
 * channels; the 114 letterbox pad is not bright) as one confident person:
 * every anchor encodes that box, but only the stride-32 cell containing the
 * box centre gets objectness 0.95 (class 0 = person, 0.9). An image with no
 * bright pixel gets objectness 0.001 everywhere, so no box passes
 * `score_thr = 0.1`.
 *
 * @module
 */

import type { EncodedModel } from "../graph/graph.ts";
import { Layers, OPSET } from "../graph/layers.ts";
import { Rng } from "../graph/rng.ts";

/** Input side length. */
export const YOLOX_SIZE = 640;
/** Strides of the three YOLOX heads. */
export const YOLOX_STRIDES: readonly number[] = [8, 16, 32];
/** Objectness of the one detection. */
export const YOLOX_OBJECTNESS = 0.95;
/** Person class probability of every anchor. */
export const YOLOX_PERSON_PROB = 0.9;

const BIG = 1e4;

/** Builds the detector (float32 I/O). */
export function buildYoloxModel(seed: number): EncodedModel {
  const L = new Layers("yolox", new Rng(seed, "yolox"));
  const g = L.g;
  const S = YOLOX_SIZE;
  const img = L.input("images", "float32", [1, 3, S, S]);

  // Anchor grid, in YOLOX order (yolox/models/yolo_head.py decode_outputs / demo_postprocess).
  const gx: number[] = [];
  const gy: number[] = [];
  const st: number[] = [];
  for (const s of YOLOX_STRIDES) {
    const n = S / s;
    for (let y = 0; y < n; y++) {
      for (let x = 0; x < n; x++) {
        gx.push(x);
        gy.push(y);
        st.push(s);
      }
    }
  }
  const A = gx.length; // 8400
  const gridX = g.init("grid_x", "float32", [A], Float32Array.from(gx));
  const gridY = g.init("grid_y", "float32", [A], Float32Array.from(gy));
  const stride = g.init("stride", "float32", [A], Float32Array.from(st));
  const coarse = g.init(
    "is_stride32",
    "float32",
    [A],
    Float32Array.from(st, (s) => s === 32 ? 1 : 0),
  );

  const gray = L.reduce("ReduceMean", img, [1], false); // [1,S,S]
  const bright = L.toFloat(g.op("Greater", [gray, g.constF([127.5], [])]));
  const colAny = L.reduce("ReduceMax", bright, [1], false); // [1,S] per column
  const rowAny = L.reduce("ReduceMax", bright, [2], false); // [1,S] per row
  const coords = g.init("coords", "float32", [S], Float32Array.from({ length: S }, (_, i) => i));
  const extent = (any: string): [string, string] => {
    const miss = L.scale(L.sub(g.constF([1], []), any), BIG);
    const lo = L.reduce("ReduceMin", L.add(coords, miss), [1], false); // [1]
    const hi = L.reduce("ReduceMax", L.sub(coords, miss), [1], false);
    return [lo, hi];
  };
  const [x0, x1] = extent(colAny);
  const [y0, y1] = extent(rowAny);
  const found = L.reduce("ReduceMax", colAny, [1], false); // [1]: 1 if any bright pixel
  const one = g.constF([1], []);
  const bw = g.op("Max", [L.add(L.sub(x1, x0), one), one]);
  const bh = g.op("Max", [L.add(L.sub(y1, y0), one), one]);
  const cx = L.scale(L.add(L.add(x0, x1), one), 0.5);
  const cy = L.scale(L.add(L.add(y0, y1), one), 0.5);

  const div = (a: string, b: string) => g.op("Div", [a, b]);
  const xo = L.sub(div(cx, stride), gridX); // [A]
  const yo = L.sub(div(cy, stride), gridY);
  const lw = g.op("Log", [div(bw, stride)]);
  const lh = g.op("Log", [div(bh, stride)]);
  const inCell = (o: string) =>
    L.mul(
      L.toFloat(g.op("GreaterOrEqual", [o, g.constF([0], [])])),
      L.toFloat(g.op("Less", [o, one])),
    );
  const chosen = L.mul(L.mul(inCell(xo), inCell(yo)), L.mul(coarse, found));
  const obj = L.shift(L.scale(chosen, YOLOX_OBJECTNESS - 0.001), 0.001);

  const col = (v: string) => L.reshape(v, [1, A, 1]);
  const classes = Array.from({ length: 80 }, (_, i) => (i === 0 ? YOLOX_PERSON_PROB : 0.01));
  const cls = g.op("Expand", [g.constF(classes, [1, 1, 80]), g.constI64([1, A, 80])]);
  const out = g.op("Concat", [col(xo), col(yo), col(lw), col(lh), col(obj), cls], {
    axis: { i: 2 },
  });
  g.output(out, "output", "float32", [1, A, 85]);
  return g.encode({
    opset: OPSET,
    docString: "tiny YOLOX-contract person detector (test fixture)",
  });
}
