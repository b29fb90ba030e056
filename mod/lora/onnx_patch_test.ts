/**
 * patchModel on a hand-built graph whose MatMul weight is float16 and stored
 * inside the model (raw_data), run with ONNX Runtime.
 */
import { deepStrictEqual, ok, strictEqual } from "node:assert";
import { join } from "node:path";
import onnx from "onnx-proto";
import { Graph } from "../graph/mod.ts";
import { createSessionFromBytes, fromFloat16Bits, Tensor, toFloat16Bits } from "../onnx/mod.ts";
import type { LoraModule } from "./kohya_keys.ts";
import { patchModel } from "./onnx_patch.ts";
import { attentionScoresModel, Q, runAttentionScores } from "../onnx/zero_addend_testing.ts";

Deno.test("patchModel: an embedded fp16 MatMul weight gets fp16(W + ΔWᵀ) and runs", async () => {
  // y = Cast32(Cast16(x) · W), W fp16 [in=4, out=3].
  const w = [0.5, -1, 2, 0.25, 0, 1.5, -0.75, 1, -2, 3, 0.125, -0.5];
  const g = new Graph("fp16");
  const x = g.input("x", "float32", [1, 4]);
  const x16 = g.op("Cast", [x], { to: { i: 10 } });
  const wName = g.init("blk.proj.weight", "float16", [4, 3], Uint16Array.from(w, toFloat16Bits));
  const y16 = g.op("MatMul", [x16, wName], {}, undefined, "/blk/proj/MatMul");
  g.output(g.op("Cast", [y16], { to: { i: 1 } }), "y", "float32", [1, 3]);
  const dir = await Deno.makeTempDir({ prefix: "lora_fp16_" });
  try {
    const path = join(dir, "model.onnx");
    await Deno.writeFile(path, g.encode({ opset: 17 }).model);
    // Rank 1: up [out=3, 1], down [1, in=4], alpha 2 → scale 2 · weight 0.5 = 1.
    const up = [1, -2, 0.5];
    const down = [0.25, 0.5, -1, 2];
    const module: LoraModule = {
      key: "lora_unet_blk_proj",
      target: "unet",
      base: "blk_proj",
      up: { shape: [3, 1], data: Float32Array.from(up) },
      down: { shape: [1, 4], data: Float32Array.from(down) },
      alpha: 2,
    };
    const patched = await patchModel(path, "unet", [{
      path: "t.safetensors",
      weight: 0.5,
      modules: [module],
    }]);
    ok(patched);
    deepStrictEqual(patched.patched, ["blk.proj.weight"]);
    deepStrictEqual(patched.externalData, []);
    // Expected, element by element: W[i][o] + up[o]·down[i], rounded to fp16.
    const expected = new Uint16Array(12);
    for (let i = 0; i < 4; i++) {
      for (let o = 0; o < 3; o++) {
        expected[i * 3 + o] = toFloat16Bits(w[i * 3 + o] + up[o] * down[i]);
      }
    }
    const model = onnx.onnx.ModelProto.decode(patched.model);
    const raw = model.graph!.initializer!.find((t) => t.name === "blk.proj.weight")!.rawData!;
    const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
    deepStrictEqual(
      Uint16Array.from({ length: 12 }, (_, i) => view.getUint16(2 * i, true)),
      expected,
    );

    const session = await createSessionFromBytes(patched.model, [], { intraOpThreads: 1 });
    try {
      const xs = [1, 2, -1, 0.5];
      const out = (await session.run({ x: new Tensor("float32", Float32Array.from(xs), [1, 4]) })).y
        .data as Float32Array;
      for (let o = 0; o < 3; o++) {
        let s = 0;
        for (let i = 0; i < 4; i++) s += xs[i] * fromFloat16Bits(expected[i * 3 + o]);
        ok(Math.abs(out[o] - s) < 0.02, `y[${o}] = ${out[o]}, expected ${s}`);
      }
    } finally {
      await session.release();
    }
    // A module for the text encoder leaves this "unet" model alone.
    strictEqual(
      await patchModel(path, "unet", [{
        path: "t",
        weight: 1,
        modules: [{ ...module, target: "text_encoder" }],
      }]),
      undefined,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("patchModel: the patched graph loses the zero baddbmm addend of its attention scores", async () => {
  // W and the update in small binary fractions, so W + ΔWᵀ is exact in float32 either way.
  const n = Q[2];
  const w = Float32Array.from({ length: n * n }, (_, i) => ((i * 7) % 9 - 4) / 8);
  const up = Float32Array.from({ length: n }, (_, o) => (o % 3) / 4);
  const down = Float32Array.from({ length: n }, (_, i) => (i % 4 - 1) / 2);
  const merged = w.map((v, k) => v + up[k % n] * down[Math.floor(k / n)]);
  const dir = await Deno.makeTempDir({ prefix: "lora_scores_" });
  try {
    const path = join(dir, "model.onnx");
    await Deno.writeFile(path, attentionScoresModel({ projection: w }));
    const patched = await patchModel(path, "unet", [{
      path: "t.safetensors",
      weight: 1,
      modules: [{
        key: "lora_unet_attn_to_q",
        target: "unet",
        base: "attn_to_q",
        up: { shape: [n, 1], data: up },
        down: { shape: [1, n], data: down },
        alpha: 1,
      }],
    }]);
    ok(patched);
    deepStrictEqual(patched.patched, ["to_q.weight"]);
    const ops = onnx.onnx.ModelProto.decode(patched.model).graph!.node!.map((x) => x.opType);
    ok(!ops.includes("ConstantOfShape") && !ops.includes("Add"), ops.join(","));
    // The same graph built with the merged weight, zero addend and all.
    deepStrictEqual(
      await runAttentionScores(patched.model),
      await runAttentionScores(attentionScoresModel({ projection: merged })),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
