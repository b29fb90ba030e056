import { deepStrictEqual, ok, strictEqual, throws } from "node:assert";
import onnx from "onnx-proto";
import { Graph } from "../graph/graph.ts";
import { axisNames, SD15_DIMS } from "./options.ts";
import { Rng } from "../graph/rng.ts";
import { residualInputName, residualShape } from "./unet.ts";

const P = onnx.onnx;

function sample(): Graph {
  const g = new Graph("t");
  const x = g.input("x", "float32", ["batch", 3]);
  const s = g.input("s", "float64", []);
  const w = g.init("w", "float32", [3, 40], new Float32Array(120).fill(0.5));
  const b = g.init("b", "float32", [40], new Float32Array(40).fill(1));
  const y = g.op("Add", [g.op("MatMul", [x, w]), b]);
  g.output(y, "y", "float32", ["batch", 40]);
  g.output(s, "s_out", "float64", []);
  return g;
}

Deno.test("Graph.encode: valid ModelProto; rank-0 shapes kept; external data laid out like onnx.save_model", () => {
  const g = sample();
  const enc = g.encode({ opset: 17, externalData: { location: "weights.pb", minBytes: 200 } });

  const m = P.ModelProto.decode(enc.model);
  const gr = m.graph as onnx.onnx.GraphProto;
  strictEqual(Number(m.irVersion), 8);
  strictEqual(Number(m.opsetImport[0].version), 17);
  deepStrictEqual(gr.input.map((i) => i.name), ["x", "s"]);
  const dims = (v: onnx.onnx.IValueInfoProto) =>
    v.type!.tensorType!.shape!.dim!.map((d) => d.dimParam || Number(d.dimValue));
  deepStrictEqual(dims(gr.input[0]), ["batch", 3]);
  ok(gr.input[1].type!.tensorType!.shape, "a rank-0 input still has a (empty) shape");
  deepStrictEqual(dims(gr.input[1]), []);
  strictEqual(gr.input[1].type!.tensorType!.elemType, 11); // DOUBLE
  // "s_out" differs from its value name, so an Identity carries it.
  const identity = gr.node.find((n) => n.opType === "Identity" && n.output?.[0] === "s_out")!;
  deepStrictEqual([identity.input, identity.output], [["s"], ["s_out"]]);

  // w (480 bytes) is external, b (160 bytes) is inline.
  const [wt, bt] = gr.initializer as onnx.onnx.TensorProto[];
  strictEqual(wt.dataLocation, P.TensorProto.DataLocation.EXTERNAL);
  deepStrictEqual(
    wt.externalData.map((e) => [e.key, e.value]),
    [["location", "weights.pb"], ["offset", "0"], ["length", "480"]],
  );
  strictEqual(bt.rawData.byteLength, 160);
  strictEqual(enc.external!.location, "weights.pb");
  strictEqual(enc.external!.data.byteLength, 480);
  strictEqual(new Float32Array(enc.external!.data.buffer)[119], 0.5);

  // Same calls, same bytes.
  const twice = sample().encode({
    opset: 17,
    externalData: { location: "weights.pb", minBytes: 200 },
  });
  deepStrictEqual(twice.model, enc.model);
  deepStrictEqual(twice.external!.data, enc.external!.data);
  const again = new Graph("t");
  strictEqual(again.fresh("x"), "x");
  strictEqual(again.fresh("x"), "x_1");
  throws(() => g.input("x", "float32", [1]), /duplicate name x/);
  throws(() => g.init("bad", "float32", [2, 2], new Float32Array(3)), /3 values for dims \[2,2\]/);
});

Deno.test("Rng: deterministic per seed and stream, uniform in [-bound, bound)", () => {
  const a = new Rng(1, "unet").uniform(1000, 0.5);
  deepStrictEqual(a, new Rng(1, "unet").uniform(1000, 0.5));
  ok(a.some((v, i) => v !== new Rng(1, "vae").uniform(1000, 0.5)[i]));
  ok(a.some((v, i) => v !== new Rng(2, "unet").uniform(1000, 0.5)[i]));
  ok(a.every((v) => v >= -0.5 && v < 0.5));
  const mean = a.reduce((x, y) => x + y, 0) / a.length;
  ok(Math.abs(mean) < 0.05, `mean ${mean}`);
});

Deno.test("residual pyramid at full SD 1.5 width matches diffusers' UNet at 512×512", () => {
  const table: [string, number[]][] = [
    ["down_block_0_additional_residual", [2, 320, 64, 64]],
    ["down_block_1_additional_residual", [2, 320, 64, 64]],
    ["down_block_2_additional_residual", [2, 320, 64, 64]],
    ["down_block_3_additional_residual", [2, 320, 32, 32]],
    ["down_block_4_additional_residual", [2, 640, 32, 32]],
    ["down_block_5_additional_residual", [2, 640, 32, 32]],
    ["down_block_6_additional_residual", [2, 640, 16, 16]],
    ["down_block_7_additional_residual", [2, 1280, 16, 16]],
    ["down_block_8_additional_residual", [2, 1280, 16, 16]],
    ["down_block_9_additional_residual", [2, 1280, 8, 8]],
    ["down_block_10_additional_residual", [2, 1280, 8, 8]],
    ["down_block_11_additional_residual", [2, 1280, 8, 8]],
    ["mid_block_additional_residual", [2, 1280, 8, 8]],
  ];
  const ax = { ...axisNames("diffusers"), batch: 2, latentHeight: 64, latentWidth: 64 };
  table.forEach(([name, shape], i) => {
    strictEqual(residualInputName(i, "additional_residual"), name);
    deepStrictEqual(residualShape(i, SD15_DIMS, ax), shape);
  });
  strictEqual(residualInputName(3, "onnx_web"), "down_block_3");
  deepStrictEqual(residualShape(9, SD15_DIMS, axisNames("optimum")), [
    "batch_size",
    1280,
    "height_div8",
    "width_div8",
  ]);
});
