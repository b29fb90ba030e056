import { deepStrictEqual, strictEqual } from "node:assert";
import {
  checkSession,
  type Feeds,
  type IoMeta,
  onnxWebResidualName,
  residualName,
  Tensor,
  toFloat32,
} from "../onnx/mod.ts";
import { ControlNetRun } from "./controlnet.ts";
import type { ModelSession } from "./model_session.ts";

const F = "float32";
const base: IoMeta[] = [
  { name: "sample", dtype: F, shape: ["B", 4, "h", "w"] },
  { name: "timestep", dtype: F, shape: ["B"] },
  { name: "encoder_hidden_states", dtype: F, shape: ["B", 77, 8] },
];

/** An onnx-web style ControlNet: no conditioning_scale, 13 outputs with arbitrary names. */
function fakeControlNet(seen: Feeds[]): ModelSession {
  const outputs: IoMeta[] = Array.from({ length: 13 }, (_, i) => ({
    name: `out_${100 + i}`,
    dtype: F,
    shape: ["B", 2, "h", "w"],
  }));
  return {
    inputs: [...base, { name: "controlnet_cond", dtype: F, shape: ["B", 3, "H", "W"] }],
    outputs,
    run(feeds) {
      seen.push(feeds);
      const result: Record<string, Tensor> = {};
      // Residual i holds the value i + 1 everywhere: [1, 2, 1, 1].
      outputs.forEach((o, i) => {
        result[o.name] = new Tensor("float32", new Float32Array(2).fill(i + 1), [1, 2, 1, 1]);
      });
      return Promise.resolve(result);
    },
    release: () => Promise.resolve(),
  };
}

Deno.test("ControlNetRun: scales residuals itself without a conditioning_scale input, binds by position", async () => {
  const seen: Feeds[] = [];
  const session = fakeControlNet(seen);
  const cnIo = checkSession("controlnet", session);
  strictEqual(cnIo.residualNaming, "position");
  strictEqual(cnIo.hasConditioningScale, false);
  // An onnx-web "cnet" UNet with fp16 residual inputs.
  const unetIo = checkSession("controlnet_unet", {
    inputs: [
      ...base,
      ...Array.from({ length: 13 }, (_, i) => ({
        name: onnxWebResidualName(i),
        dtype: "float16",
        shape: ["B", 2, "h", "w"],
      })),
    ],
    outputs: [{ name: "out_sample", dtype: F, shape: ["B", 4, "h", "w"] }],
  });
  const run = new ControlNetRun(
    { session, io: cnIo, conditioningScale: 0.5 },
    unetIo,
    new Tensor("float32", new Float32Array(77 * 8), [1, 77, 8]),
    new Float32Array(3 * 8 * 8).fill(0.25),
    [1, 3, 8, 8],
  );
  const bound = await run.residuals(new Float32Array(4), [1, 4, 1, 1], 981);
  deepStrictEqual(
    Object.keys(bound).sort(),
    Array.from({ length: 13 }, (_, i) => onnxWebResidualName(i)).sort(),
  );
  for (let i = 0; i < 13; i++) {
    const t = bound[onnxWebResidualName(i)];
    strictEqual(t.type, "float16");
    deepStrictEqual(Array.from(toFloat32(t)), [(i + 1) * 0.5, (i + 1) * 0.5], `residual ${i}`);
  }
  // The ControlNet saw the sample, the timestep in its dtype and the control image.
  deepStrictEqual(Object.keys(seen[0]).sort(), [
    "controlnet_cond",
    "encoder_hidden_states",
    "sample",
    "timestep",
  ]);
  deepStrictEqual(Array.from(seen[0].timestep.data as Float32Array), [981]);
  strictEqual(residualName(12), "mid_block_additional_residual");
});
