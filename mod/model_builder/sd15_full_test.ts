import { strictEqual } from "node:assert";
import onnx from "onnx-proto";
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

Deno.test("writeFiles: lazy weights streamed to external data; fp16 retypes I/O, weights and casts", async () => {
  const dir = await Deno.makeTempDir({ prefix: "full_write_" });
  try {
    const { graph } = buildFullVaeDecoder(3);
    const opts = { opset: 17, externalData: { location: "model.onnx_data", minBytes: 1024 } };
    const a = graph.writeFiles(`${dir}/a.onnx`, opts);
    strictEqual((await Deno.stat(`${dir}/model.onnx_data`)).size, a.externalBytes);
    // Every parameter is float32 in the external file (plus small inline constants).
    strictEqual(a.externalBytes >= SD15_PARAMS.vaeDecoder * 4 - 4 * 4096, true);
    const b = buildFullVaeDecoder(3).graph.writeFiles(`${dir}/b.onnx`, { ...opts, float16: true });
    strictEqual(b.externalBytes * 2 > a.externalBytes * 0.99, true);
    strictEqual(b.externalBytes < a.externalBytes * 0.51, true);
    const m = onnx.onnx.ModelProto.decode(await Deno.readFile(`${dir}/b.onnx`));
    strictEqual(m.graph!.input![0].type!.tensorType!.elemType, 10);
    strictEqual(m.graph!.output![0].type!.tensorType!.elemType, 10);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
