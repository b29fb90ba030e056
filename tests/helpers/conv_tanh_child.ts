/**
 * Child process of the webgpu tests: a one-Conv model followed by `Tanh`,
 * run on the webgpu provider at graph optimization "basic" and "all" with
 * inputs of growing magnitude; prints one JSON line with the outputs. Pins
 * the ONNX Runtime behaviour docs/gpu.md describes ("Known ONNX Runtime
 * issue: fused Conv + Tanh").
 *
 * ```sh
 * deno run -P=test tests/helpers/conv_tanh_child.ts
 * ```
 *
 * @module
 */

import { Graph } from "../../mod/graph/mod.ts";
import { createSessionFromBytes, Tensor, toFloat32 } from "../../mod/onnx/mod.ts";

const g = new Graph("conv_tanh");
const x = g.input("x", "float32", [1, 1, 2, 4]);
const conv = g.op("Conv", [x, g.constF([1], [1, 1, 1, 1])]); // a 1×1 identity convolution
g.output(g.op("Tanh", [conv]), "y", "float32", [1, 1, 2, 4]);
const model = g.encode({ opset: 17 }).model;

/** The inputs: below and above 89, where exp(2x) overflows float32. */
export const INPUTS = [0.5, -3, 44, 88, 89, -89, 100, 1000];

const out: Record<string, Array<number | null>> = {};
for (const level of ["basic", "all"] as const) {
  const s = await createSessionFromBytes(model, [], {
    executionProvider: "webgpu",
    graphOptimization: level,
  });
  const r = await s.run({ x: new Tensor("float32", Float32Array.from(INPUTS), [1, 1, 2, 4]) });
  // JSON has no NaN: null stands for it.
  out[level] = Array.from(toFloat32(r.y), (v) => (Number.isNaN(v) ? null : v));
  await s.release();
}
console.log(JSON.stringify(out));
