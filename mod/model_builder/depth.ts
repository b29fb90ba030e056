/**
 * A tiny MiDaS-like depth model: one image `x [1,3,height,width]` → relative
 * inverse depth `y [1,height,width]` (the axodox `annotators/depth.onnx` names
 * and output rank, from axodox `DepthEstimator.cpp`). Brighter pixels come out "nearer"
 * (larger): a blurred luminance plus a small seeded 3×3 conv, through
 * Softplus so the map is positive like MiDaS output.
 *
 * @module
 */

import type { EncodedModel } from "../graph/graph.ts";
import { Layers, OPSET } from "../graph/layers.ts";
import { Rng } from "../graph/rng.ts";

/** Builds the depth model (float32 I/O). */
export function buildDepthModel(seed: number): EncodedModel {
  const L = new Layers("depth", new Rng(seed, "depth"));
  const g = L.g;
  const x = L.input("x", "float32", [1, 3, "height", "width"]);
  const gray = L.reduce("ReduceMean", x, [1], true);
  const blur = g.op("AveragePool", [gray], {
    kernel_shape: { ints: [5, 5] },
    pads: { ints: [2, 2, 2, 2] },
    strides: { ints: [1, 1] },
    count_include_pad: { i: 0 },
  });
  const detail = L.conv(x, 3, 1, 3, { gain: 0.5, hint: "detail" });
  const y = g.op("Softplus", [L.add(L.scale(blur, 3), detail)]);
  g.output(L.squeeze(y, [1]), "y", "float32", [1, "height", "width"]);
  return g.encode({ opset: OPSET, docString: "tiny depth estimator (test fixture)" });
}
