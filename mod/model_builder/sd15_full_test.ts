import { deepStrictEqual, ok, strictEqual } from "node:assert";
import onnx from "onnx-proto";
import { createSession, floatTensor, toFloat32 } from "../onnx/mod.ts";
import { Layers } from "../graph/layers.ts";
import { Rng } from "../graph/rng.ts";
import { fixNodeName } from "../lora/kohya_keys.ts";
import {
  buildFullControlNet,
  buildFullTextEncoder,
  buildFullUnet,
  buildFullVaeDecoder,
  buildFullVaeEncoder,
  lcmLoraModules,
  SD15_PARAMS,
} from "./sd15_full.ts";

Deno.test("full-size graphs have the real SD 1.5 parameter counts (weights stay lazy)", () => {
  strictEqual(buildFullUnet(1).params, SD15_PARAMS.unet);
  strictEqual(buildFullTextEncoder(1).params, SD15_PARAMS.textEncoder);
  strictEqual(buildFullVaeDecoder(1).params, SD15_PARAMS.vaeDecoder);
  const encoder = buildFullVaeEncoder(1);
  strictEqual(encoder.params, SD15_PARAMS.vaeEncoder);
  strictEqual(SD15_PARAMS.vaeEncoder + SD15_PARAMS.vaeDecoder, SD15_PARAMS.vae, "the two halves");
  // The diffusers script's output, drawn in the graph as `encode(x)[0].sample()` traces.
  deepStrictEqual(Object.keys(encoder.graph.signature().outputs), ["latent_sample"]);
  ok(encoder.graph.nodeNames().some((n) => n.op === "RandomNormalLike"));
});

Deno.test("full-size ControlNet: its 13 residuals are exactly the residual UNet's extra inputs", () => {
  const cn = buildFullControlNet(1);
  const unet = buildFullUnet(1);
  const res = buildFullUnet(1, { residuals: true });
  // The residual UNet is the UNet plus 13 inputs: same parameters.
  strictEqual(res.params, SD15_PARAMS.unet);
  // diffusers ControlNetModel for SD 1.5: the UNet's encoder half (time embedding, conv_in,
  // down and mid blocks) + cond embedding + 13 zero convs; the count this structure gives.
  strictEqual(cn.params, 361_279_120);
  const outs = cn.graph.signature().outputs;
  const ins = res.graph.signature().inputs;
  const residualIns = Object.fromEntries(
    Object.entries(ins).filter(([n]) => n.endsWith("_additional_residual")),
  );
  deepStrictEqual(Object.keys(outs).sort(), Object.keys(residualIns).sort());
  strictEqual(Object.keys(outs).length, 13);
  for (const [name, dims] of Object.entries(outs)) {
    strictEqual(dims[1], residualIns[name][1], `${name}: channels`);
  }
  // Channels of the pyramid: 320 ×4, 640 ×3, 1280 ×5 (down blocks), 1280 (mid).
  deepStrictEqual(
    Array.from({ length: 12 }, (_, i) => outs[`down_block_${i}_additional_residual`][1]),
    [320, 320, 320, 320, 640, 640, 640, 1280, 1280, 1280, 1280, 1280],
  );
  deepStrictEqual(Object.keys(cn.graph.signature().inputs), [
    "sample",
    "timestep",
    "encoder_hidden_states",
    "controlnet_cond",
    "conditioning_scale",
  ]);
  ok(!Object.keys(unet.graph.signature().inputs).some((n) => n.includes("residual")));
});

Deno.test("LCM-shaped LoRA modules: the published file's size, and every key names a UNet node", () => {
  const unet = buildFullUnet(1);
  const modules = lcmLoraModules(unet);
  strictEqual(modules.length, 278);
  // Rank 64, fp16: (in·k·k + out)·64 values of 2 bytes per module.
  const bytes = modules.reduce((a, m) => a + 2 * 64 * (m.in * m.k * m.k + m.out), 0);
  strictEqual(bytes, 134_504_448);
  // The published lcm-lora-sdv1-5 file is 134,621,556 bytes: these tensors + header + alphas.
  ok(134_621_556 - bytes > 0 && 134_621_556 - bytes < 200_000);
  // kohya keys resolve as mod/lora resolves them: against `fixNodeName` of MatMul/Conv nodes.
  const nodes = new Set(
    unet.graph.nodeNames().filter((n) => n.op === "MatMul" || n.op === "Conv").map((n) =>
      fixNodeName(n.name)
    ),
  );
  for (const m of modules) {
    const path = m.key.slice("lora_unet_".length);
    ok(nodes.has(`${path}_${m.kind === "conv" ? "Conv" : "MatMul"}`), m.key);
  }
});

Deno.test("writeFiles: lazy weights streamed to external data; fp16 retypes weights, I/O and casts and still runs", async () => {
  const dir = await Deno.makeTempDir({ prefix: "full_write_" });
  const build = () => {
    const L = new Layers("t", new Rng(5, "t"), "float32", true);
    const x = L.floatIn("x", [1, 4, "h", "w"]);
    const y = L.upscale(L.silu(L.conv(x, 4, 64, 3, { hint: "c1" })), 2, "nearest");
    const z = L.conv(y, 64, 3, 3, { hint: "c2" });
    L.floatOut(L.toFloat(z), "y", [1, 3, "H", "W"]); // a Cast to float32, retyped in fp16
    return L;
  };
  try {
    const opts = { opset: 17, externalData: { location: "w32.bin", minBytes: 1024 } };
    const a = build();
    const w32 = a.g.writeFiles(`${dir}/a.onnx`, opts);
    strictEqual((await Deno.stat(`${dir}/w32.bin`)).size, w32.externalBytes);
    strictEqual(w32.externalBytes, (4 * 64 * 9 + 64 * 3 * 9) * 4, "the two conv weights, fp32");
    strictEqual(a.params, 4 * 64 * 9 + 64 + 64 * 3 * 9 + 3);
    const w16 = build().g.writeFiles(`${dir}/b.onnx`, {
      ...opts,
      externalData: { ...opts.externalData, location: "w16.bin" },
      float16: true,
    });
    strictEqual(w16.externalBytes * 2, w32.externalBytes);
    const m = onnx.onnx.ModelProto.decode(await Deno.readFile(`${dir}/b.onnx`));
    strictEqual(m.graph!.input![0].type!.tensorType!.elemType, 10);
    strictEqual(m.graph!.output![0].type!.tensorType!.elemType, 10);
    const x = Float32Array.from({ length: 4 * 5 * 6 }, (_, i) => Math.sin(i));
    const s32 = await createSession(`${dir}/a.onnx`, { intraOpThreads: 1 });
    const s16 = await createSession(`${dir}/b.onnx`, { intraOpThreads: 1 });
    try {
      const y32 = toFloat32((await s32.run({ x: floatTensor("float32", x, [1, 4, 5, 6]) })).y);
      const y16 = toFloat32((await s16.run({ x: floatTensor("float16", x, [1, 4, 5, 6]) })).y);
      strictEqual(y32.length, 3 * 10 * 12);
      ok(y32.some((v) => Math.abs(v) > 0.01), "the model computes something");
      ok(
        y16.every((v, i) => Math.abs(v - y32[i]) < 0.02),
        "fp16 agrees with fp32 to half precision",
      );
    } finally {
      await s32.release();
      await s16.release();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
