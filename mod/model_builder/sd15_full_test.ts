import { ok, strictEqual } from "node:assert";
import onnx from "onnx-proto";
import { createSession, floatTensor, toFloat32 } from "../onnx/mod.ts";
import { Layers } from "./layers.ts";
import { Rng } from "./rng.ts";
import {
  buildFullTextEncoder,
  buildFullUnet,
  buildFullVaeDecoder,
  SD15_PARAMS,
} from "./sd15_full.ts";

Deno.test("full-size graphs have the real SD 1.5 parameter counts (weights stay lazy)", () => {
  strictEqual(buildFullUnet(1).params, SD15_PARAMS.unet);
  strictEqual(buildFullTextEncoder(1).params, SD15_PARAMS.textEncoder);
  strictEqual(buildFullVaeDecoder(1).params, SD15_PARAMS.vaeDecoder);
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
