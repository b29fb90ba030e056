import assert from "node:assert/strict";
import { join } from "node:path";
import onnx from "onnx-proto";
import {
  createSession,
  float16BitsToFloat32,
  fromFloat16Bits,
  Tensor,
  toFloat16Bits,
} from "../onnx/mod.ts";
import { widenToFp32 } from "./fp32.ts";
import { smallGraph } from "./testing.ts";
import { attentionScoresModel, runAttentionScores } from "../onnx/zero_addend_testing.ts";

const P = onnx.onnx;

/** Every initializer of a written model with its values read as float32 (external data resolved). */
async function initializers(
  path: string,
): Promise<Map<string, { type: number; values: Float32Array }>> {
  const model = P.ModelProto.decode(await Deno.readFile(path));
  const out = new Map<string, { type: number; values: Float32Array }>();
  for (const t of model.graph!.initializer!) {
    let raw = t.rawData!;
    if (t.dataLocation === P.TensorProto.DataLocation.EXTERNAL) {
      const kv = new Map(t.externalData!.map((e) => [e.key, e.value]));
      const file = await Deno.readFile(join(path, "..", kv.get("location")!));
      const at = Number(kv.get("offset"));
      raw = file.subarray(at, at + Number(kv.get("length")));
    }
    if (t.dataType !== 1 && t.dataType !== 10) continue;
    const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
    const values = t.dataType === 1
      ? Float32Array.from({ length: raw.length / 4 }, (_, i) => view.getFloat32(4 * i, true))
      : float16BitsToFloat32(
        Uint16Array.from({ length: raw.length / 2 }, (_, i) => view.getUint16(2 * i, true)),
      );
    out.set(t.name!, { type: t.dataType!, values });
  }
  return out;
}

const feeds = (io: "float32" | "float16") => {
  const x = Float32Array.from({ length: 2 * 4 * 6 * 6 }, (_, i) => Math.sin(i * 0.37));
  return {
    sample: io === "float32"
      ? new Tensor("float32", x, [2, 4, 6, 6])
      : new Tensor("float16", Uint16Array.from(x, (v) => toFloat16Bits(v)), [2, 4, 6, 6]),
    step: new Tensor("int64", BigInt64Array.from([3n, 900n]), [2]),
  };
};

Deno.test("widenToFp32: float16 weights, casts and I/O become float32, equal to the fp32 graph on fp16-rounded weights", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sd15-fp32-" });
  try {
    for (const d of ["fp16", "fp32", "out", "out2"]) await Deno.mkdir(join(dir, d));
    const g = smallGraph();
    const ext = { location: "weights.pb", minBytes: 64 };
    g.writeFiles(join(dir, "fp16/model.onnx"), { opset: 17, externalData: ext, float16: true });
    g.writeFiles(join(dir, "fp32/model.onnx"), { opset: 17, externalData: ext });
    const report = await widenToFp32(join(dir, "fp16/model.onnx"), join(dir, "out"));
    assert.deepEqual(report.files.map((f) => f.name), ["model.onnx", "weights.pb"]);
    for (const f of report.files) {
      assert.equal((await Deno.stat(join(dir, "out", f.name))).size, f.size, f.name);
    }
    assert.ok(
      report.tensors > 4 && report.casts === 1 && report.declarations === 2,
      JSON.stringify(report),
    );

    // Every weight is exactly the fp16 value, which is the fp32 weight rounded to fp16.
    const half = await initializers(join(dir, "fp16/model.onnx"));
    const full = await initializers(join(dir, "fp32/model.onnx"));
    const wide = await initializers(join(dir, "out/model.onnx"));
    let widened = 0;
    for (const [name, w] of wide) {
      assert.equal(w.type, 1, name);
      const h = half.get(name)!;
      assert.deepEqual(w.values, h.values, name);
      assert.deepEqual(
        w.values,
        Float32Array.from(full.get(name)!.values, (v) => fromFloat16Bits(toFloat16Bits(v))),
        name,
      );
      if (h.type === 10) widened++;
    }
    assert.ok(widened > 4);

    // The widened model runs in fp32 and computes exactly what the fp32 graph does on those weights.
    const rounded = await roundedCopy(join(dir, "fp32/model.onnx"), join(dir, "rounded.onnx"));
    const a = await createSession(join(dir, "out/model.onnx"), { intraOpThreads: 1 });
    const b = await createSession(rounded, { intraOpThreads: 1 });
    const c = await createSession(join(dir, "fp16/model.onnx"), { intraOpThreads: 1 });
    try {
      assert.deepEqual(a.inputs.map((i) => i.dtype), ["float32", "int64"]);
      assert.deepEqual(a.outputs.map((o) => o.dtype), ["float32"]);
      const ya = (await a.run(feeds("float32"))).out.data as Float32Array;
      const yb = (await b.run(feeds("float32"))).out.data as Float32Array;
      const yc = float16BitsToFloat32((await c.run(feeds("float16"))).out.data as Uint16Array);
      assert.deepEqual(ya, yb);
      // fp16 compute is only close to it (the difference the widening removes).
      const err = Math.max(...ya.map((v, i) => Math.abs(v - yc[i])));
      const scale = Math.max(...ya.map(Math.abs));
      assert.ok(err > 0 && err < 0.01 * scale, `fp16 vs fp32 max error ${err} of ${scale}`);
    } finally {
      await Promise.all([a.release(), b.release(), c.release()]);
    }

    // Deterministic: the same input gives the same bytes.
    const again = await widenToFp32(join(dir, "fp16/model.onnx"), join(dir, "out2"));
    assert.deepEqual(again.files, report.files);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("widenToFp32: float16 in int32_data, and a short external file named in the error", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sd15-fp32-" });
  try {
    await Deno.mkdir(join(dir, "out"));
    const bits = [toFloat16Bits(1.5), toFloat16Bits(-2.25), toFloat16Bits(65504)];
    const model = P.ModelProto.create({
      irVersion: 8,
      opsetImport: [{ domain: "", version: 17 }],
      graph: {
        name: "g",
        initializer: [{ name: "w", dataType: 10, dims: [3], int32Data: bits }],
        node: [{ opType: "Add", input: ["x", "w"], output: ["y"] }],
        input: [{
          name: "x",
          type: { tensorType: { elemType: 10, shape: { dim: [{ dimValue: 3 }] } } },
        }],
        output: [{
          name: "y",
          type: { tensorType: { elemType: 10, shape: { dim: [{ dimValue: 3 }] } } },
        }],
      },
    });
    await Deno.writeFile(join(dir, "model.onnx"), P.ModelProto.encode(model).finish());
    await widenToFp32(join(dir, "model.onnx"), join(dir, "out"));
    const s = await createSession(join(dir, "out/model.onnx"));
    try {
      const y = await s.run({ x: new Tensor("float32", new Float32Array([1, 1, 0]), [3]) });
      assert.deepEqual(Array.from(y.y.data as Float32Array), [2.5, -1.25, 65504]);
    } finally {
      await s.release();
    }

    const g = smallGraph();
    await Deno.mkdir(join(dir, "fp16"));
    g.writeFiles(join(dir, "fp16/model.onnx"), {
      opset: 17,
      externalData: { location: "weights.pb", minBytes: 64 },
      float16: true,
    });
    const size = (await Deno.stat(join(dir, "fp16/weights.pb"))).size;
    await Deno.truncate(join(dir, "fp16/weights.pb"), size - 10);
    await Deno.mkdir(join(dir, "out3"));
    await assert.rejects(
      widenToFp32(join(dir, "fp16/model.onnx"), join(dir, "out3")),
      /lies at \d+\+\d+ beyond the end of "weights\.pb"/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** The model with every float32 initializer rounded to fp16 precision (external data loaded inline). */
async function roundedCopy(path: string, to: string): Promise<string> {
  const model = P.ModelProto.decode(await Deno.readFile(path));
  const values = await initializers(path);
  for (const t of model.graph!.initializer!) {
    const v = values.get(t.name!);
    if (!v) continue;
    const r = Float32Array.from(v.values, (x) => fromFloat16Bits(toFloat16Bits(x)));
    t.rawData = new Uint8Array(r.buffer);
    t.dataLocation = P.TensorProto.DataLocation.DEFAULT;
    t.externalData = [];
  }
  await Deno.writeFile(to, P.ModelProto.encode(model).finish());
  return to;
}

Deno.test("widenToFp32: the zero baddbmm addend of exported attention scores is dropped, output unchanged", async () => {
  const dir = await Deno.makeTempDir({ prefix: "fp32_scores_" });
  try {
    const original = attentionScoresModel();
    await Deno.writeFile(join(dir, "model.onnx"), original);
    await Deno.mkdir(join(dir, "out"));
    const report = await widenToFp32(join(dir, "model.onnx"), join(dir, "out"));
    assert.equal(report.zeroAddends, 1);
    const written = await Deno.readFile(join(dir, "out", "model.onnx"));
    const ops = P.ModelProto.decode(written).graph!.node!.map((n) => n.opType);
    assert.ok(!ops.includes("ConstantOfShape"), ops.join(","));
    assert.deepEqual(await runAttentionScores(written), await runAttentionScores(original));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
