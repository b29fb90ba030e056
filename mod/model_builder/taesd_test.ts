import { deepStrictEqual, ok, strictEqual } from "node:assert";
import onnx from "onnx-proto";
import { createSessionFromBytes, floatTensor, toFloat32 } from "../onnx/mod.ts";
import { buildTaesdDecoder, TAESD_CHANNELS } from "./taesd.ts";

/** Trainable parameters: the conv weights and biases (`*_w`, `*_b`), not the constants. */
function parameters(model: Uint8Array): number {
  const m = onnx.onnx.ModelProto.decode(model);
  return m.graph!.initializer!
    .filter((t) => /_(w|b)$/.test(t.name!))
    .reduce((n, t) => n + t.dims!.map(Number).reduce((a, b) => a * b, 1), 0);
}

Deno.test("TAESD decoder: the real structure has TAESD's 1,222,531 decoder parameters at width 64", () => {
  const full = buildTaesdDecoder(1, TAESD_CHANNELS);
  strictEqual(parameters(full.model), 1_222_531); // madebyollin/taesd README table
  const ops = new Set(onnx.onnx.ModelProto.decode(full.model).graph!.node!.map((n) => n.opType));
  deepStrictEqual([...ops].sort(), ["Add", "Conv", "Identity", "Mul", "Relu", "Resize", "Tanh"]);
});

Deno.test("TAESD decoder (width 8): latent_sample [B,4,h,w] → sample [B,3,8h,8w] in [-1,1] ± , deterministic", async () => {
  const a = buildTaesdDecoder(3, 8);
  deepStrictEqual(a.model, buildTaesdDecoder(3, 8).model);
  const s = await createSessionFromBytes(a.model, [], { intraOpThreads: 1 });
  try {
    deepStrictEqual(s.inputs.map((i) => [i.name, i.shape]), [
      ["latent_sample", ["batch_size", 4, "latent_height", "latent_width"]],
    ]);
    deepStrictEqual(s.outputs.map((o) => [o.name, o.shape]), [
      ["sample", ["batch_size", 3, "height", "width"]],
    ]);
    const z = Float32Array.from({ length: 4 * 6 * 8 }, (_, i) => Math.sin(i * 0.7) * 2);
    const out = await s.run({ latent_sample: floatTensor("float32", z, [1, 4, 6, 8]) });
    deepStrictEqual(out.sample.dims, [1, 3, 48, 64]);
    const v = toFloat32(out.sample);
    ok(new Set(Array.from(v, (x) => Math.round(x * 100))).size > 10, "the output varies");
    // Scaling the latents changes the picture: the decoder sees them unscaled.
    const z2 = z.map((x) => x / 0.18215);
    const v2 = toFloat32(
      (await s.run({ latent_sample: floatTensor("float32", z2, [1, 4, 6, 8]) })).sample,
    );
    ok(v.some((x, i) => Math.abs(x - v2[i]) > 1e-3));
  } finally {
    await s.release();
  }
});
