/**
 * Test helpers: a small graph with what an fp16 export holds (convs, a
 * MatMul, constants, a Cast, a Resize), written as fp16 or fp32 files.
 *
 * @module
 */

import { join } from "node:path";
import { type Graph, Layers, Rng } from "../graph/mod.ts";

/** The small graph: `sample [batch, 4, h, w]`, `step [batch]` int64 → `out [batch, 8, 2h, 2w]`. */
export function smallGraph(seed = 7): Graph {
  const L = new Layers("fp32_test", new Rng(seed, "fp32_test"));
  const x = L.floatIn("sample", ["batch", 4, "h", "w"]);
  let h = L.silu(L.conv(x, 4, 8, 3, { hint: "conv_in" }));
  h = L.upscale(h, 2, "nearest");
  h = L.scale(L.conv(h, 8, 8, 3, { hint: "conv_mid" }), 0.5);
  const pooled = L.reduce("ReduceMean", h, [2, 3], false);
  const t = L.toFloat(L.input("step", "int64", ["batch"]));
  const lin = L.linear(L.add(pooled, L.unsqueeze(t, [1])), 8, 8, 1, "linear");
  L.floatOut(L.add(h, L.unsqueeze(lin, [2, 3])), "out", ["batch", 8, "h2", "w2"]);
  return L.g;
}

/**
 * Writes the small graph into `dir` as `model.onnx` (+ `location` external
 * data when given), fp16 unless `fp32`; returns the written file names.
 */
export async function writeSmallModel(
  dir: string,
  options: { location?: string; fp32?: boolean; seed?: number } = {},
): Promise<string[]> {
  await Deno.mkdir(dir, { recursive: true });
  const location = options.location ?? "inline.bin";
  smallGraph(options.seed).writeFiles(join(dir, "model.onnx"), {
    opset: 17,
    externalData: { location, minBytes: options.location ? 64 : Number.MAX_SAFE_INTEGER },
    float16: !options.fp32,
  });
  if (!options.location) await Deno.remove(join(dir, location));
  return options.location ? ["model.onnx", location] : ["model.onnx"];
}
