import { deepStrictEqual, ok, rejects, strictEqual, throws } from "node:assert";
import { createHash } from "node:crypto";
import { join } from "node:path";
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
