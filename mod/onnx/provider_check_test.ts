import { deepStrictEqual, strictEqual } from "node:assert";
import { castProbeModel, checkExecutionProvider } from "./provider_check.ts";
import { createSessionFromBytes, Tensor } from "./runtime.ts";

Deno.test("castProbeModel: a valid ONNX model that ONNX Runtime opens and runs: float32 → float16 bits", async () => {
  const session = await createSessionFromBytes(castProbeModel(), [], {
    graphOptimization: "disabled",
  });
  try {
    deepStrictEqual(session.inputs, [{ name: "x", dtype: "float32", shape: [4] }]);
    deepStrictEqual(session.outputs, [{ name: "y", dtype: "float16", shape: [4] }]);
    const out = await session.run({
      x: new Tensor("float32", Float32Array.from([0.5, -2, 1, 65504]), [4]),
    });
    // IEEE 754 half: 0.5 = 0x3800, -2 = 0xc000, 1 = 0x3c00, 65504 (the largest half) = 0x7bff.
    deepStrictEqual(Array.from(out.y.data as Uint16Array), [0x3800, 0xc000, 0x3c00, 0x7bff]);
  } finally {
    await session.release();
  }
});

Deno.test("checkExecutionProvider: the CPU provider is not probed and computes float16", async () => {
  deepStrictEqual(await checkExecutionProvider("cpu"), { provider: "cpu", float16: true });
});

Deno.test("checkExecutionProvider: cuda without its libraries fails with the explanation alone", async () => {
  // This onnxruntime-node lists cuda but does not bundle it, and the tests never run its install
  // script, so the CUDA provider libraries are absent wherever the tests run.
  const result = await checkExecutionProvider("cuda").then((r) => r, (e: Error) => e);
  if (!(result instanceof Error)) {
    // A machine where someone installed the CUDA libraries and has a GPU.
    deepStrictEqual(result, { provider: "cuda", float16: true });
    return;
  }
  const error = result;
  strictEqual(error.name, "ExecutionProviderError");
  strictEqual(error.message.startsWith("execution provider `cuda` "), true, error.message);
});
