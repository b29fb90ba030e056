import { deepStrictEqual, ok, rejects, strictEqual, throws } from "node:assert";
import { createHash } from "node:crypto";
import { join } from "node:path";
import onnx from "onnx-proto";
import { createSession, floatTensor, toFloat32 } from "../onnx/mod.ts";
import { Graph } from "./graph.ts";
import { Layers } from "./layers.ts";
import { Rng } from "./rng.ts";

/** A graph with inline and large weights, constants, a Cast and a Resize (kept float32 in fp16). */
function sample(asyncWeights: boolean): Graph {
  const L = new Layers("sample", new Rng(3, "sample"), "float32", true);
  const x = L.floatIn("x", [1, 4, "h", "w"]);
  let y = L.silu(L.conv(x, 4, 32, 3, { hint: "c1" }));
  y = L.upscale(y, 2, "nearest");
  const w = L.g.init(
    "late",
    "float32",
    [32, 8],
    asyncWeights
      ? () => Promise.resolve(new Rng(9, "late").uniform(256, 0.1))
      : () => new Rng(9, "late").uniform(256, 0.1),
  );
  const t = L.g.op("Transpose", [y], { perm: { ints: [0, 2, 3, 1] } });
  L.floatOut(L.toFloat(L.g.op("MatMul", [t, w])), "y", [1, "H", "W", 8]);
  return L.g;
}

const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

Deno.test("writeModel: the bytes encode and writeFiles write, inline or external, fp32 or fp16, streamed", async () => {
  const dir = await Deno.makeTempDir({ prefix: "graph_write_" });
  try {
    // All inline: what encode() gives.
    const files = await sample(true).writeModel(join(dir, "inline.onnx"), { opset: 17 });
    const inline = await Deno.readFile(join(dir, "inline.onnx"));
    deepStrictEqual(inline, new Uint8Array(sample(false).encode({ opset: 17 }).model));
    deepStrictEqual(files, [{ name: "inline.onnx", size: inline.byteLength, sha256: sha(inline) }]);
    // External data, fp16 and fp32: what writeFiles gives.
    for (const float16 of [false, true]) {
      const opts = {
        opset: 17,
        docString: "d",
        externalData: { location: `w${float16}.bin`, minBytes: 512 },
        float16,
      };
      const streamed = await sample(true).writeModel(join(dir, `s${float16}.onnx`), opts);
      sample(false).writeFiles(join(dir, `f${float16}.onnx`), opts);
      const model = await Deno.readFile(join(dir, `s${float16}.onnx`));
      deepStrictEqual(model, await Deno.readFile(join(dir, `f${float16}.onnx`)));
      const ext = await Deno.readFile(join(dir, `w${float16}.bin`));
      ok(ext.byteLength > 0);
      deepStrictEqual(streamed.map((f) => [f.name, f.size, f.sha256]), [
        [`s${float16}.onnx`, model.byteLength, sha(model)],
        [`w${float16}.bin`, ext.byteLength, sha(ext)],
      ]);
    }
    // An async initializer cannot be made by the synchronous writers.
    throws(() => sample(true).encode({ opset: 17 }), /writeModel/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("writeModel: progress per tensor, and an abort between tensors stops it", async () => {
  const dir = await Deno.makeTempDir({ prefix: "graph_write_" });
  try {
    const seen: Array<[number, number]> = [];
    await sample(false).writeModel(join(dir, "a.onnx"), {
      opset: 17,
      onTensor: (done, total) => seen.push([done, total]),
    });
    const total = seen[0][1];
    ok(total >= 4);
    deepStrictEqual(seen, Array.from({ length: total }, (_, i) => [i + 1, total]));
    const controller = new AbortController();
    await rejects(
      sample(false).writeModel(join(dir, "b.onnx"), {
        opset: 17,
        signal: controller.signal,
        onTensor: (done) => done === 2 && controller.abort(new Error("halt")),
      }),
      /halt/,
    );
    strictEqual((await Deno.stat(join(dir, "b.onnx"))).isFile, true, "the caller removes it");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("keepFloat32: marked initializers and Casts stay float32 in an fp16 model, which still runs", async () => {
  const build = () => {
    const L = new Layers("k", new Rng(4, "k"));
    const t = L.floatIn("t", [2]);
    const t32 = L.g.keepFloat32(L.g.op("Cast", [t], { to: { i: 1 } }, "t32"));
    const f = L.g.keepFloat32(L.g.constF([0.5, 1000.25], [1, 2]));
    const arg = L.mul(L.unsqueeze(t32, [1]), f);
    const back = L.g.op("Cast", [L.g.op("Sin", [arg])], { to: { i: 1 } }, "back");
    L.floatOut(L.add(back, L.g.constF([1], [])), "y", [2, 2]);
    return L.g;
  };
  const bytes = build().encode({ opset: 17 }).model;
  const dir = await Deno.makeTempDir({ prefix: "graph_keep_" });
  try {
    await build().writeModel(join(dir, "m.onnx"), { opset: 17, float16: true });
    const m = onnx.onnx.ModelProto.decode(await Deno.readFile(join(dir, "m.onnx")));
    const types = Object.fromEntries(m.graph!.initializer!.map((t) => [t.name, t.dataType]));
    deepStrictEqual(
      Object.values(types).sort(),
      [1, 10, 7],
      "the marked constant float32, the other float16, the axes int64",
    );
    const casts = m.graph!.node!.filter((n) => n.opType === "Cast").map((n) =>
      Number(n.attribute![0].i)
    );
    deepStrictEqual(casts, [1, 10], "into float32, back to float16");
    ok(bytes.byteLength > 0);
    const s = await createSession(join(dir, "m.onnx"), { intraOpThreads: 1 });
    try {
      const y = toFloat32(
        (await s.run({ t: floatTensor("float16", Float32Array.of(999, 3), [2]) })).y,
      );
      // sin(999 · 1000.25) in float32, then + 1 in half precision.
      ok(Math.abs(y[1] - (1 + Math.sin(Math.fround(999 * Math.fround(1000.25))))) < 2e-3, `${y}`);
    } finally {
      await s.release();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
