import { deepStrictEqual, rejects, strictEqual } from "node:assert";
import { join } from "node:path";
import { encodeSafetensors } from "../../tests/fixtures/builder/lora.ts";
import { loadEmbeddings } from "./embedding_set.ts";

async function write(path: string, shape: number[], start: number): Promise<Float32Array> {
  const n = shape.reduce((a, b) => a * b, 1);
  const data = Float32Array.from({ length: n }, (_, i) => start + i);
  await Deno.writeFile(
    path,
    encodeSafetensors([{ name: "emb_params", dtype: "F32", shape, data }]),
  );
  return data;
}

Deno.test("loadEmbeddings: rows after the vocabulary, one per vector, in config order", async () => {
  const dir = await Deno.makeTempDir({ prefix: "embedding_set_" });
  try {
    const a = await write(join(dir, "a.safetensors"), [2, 4], 0);
    const b = await write(join(dir, "b.safetensors"), [3, 4], 100);
    const loaded = await loadEmbeddings([
      { path: join(dir, "a.safetensors"), name: "first" },
      { path: join(dir, "b.safetensors"), name: "b" },
    ], 49408);
    strictEqual(loaded.width, 4);
    deepStrictEqual(loaded.embeddings.map((e) => [e.name, e.rowIds]), [
      ["first", [49408, 49409]],
      ["b", [49410, 49411, 49412]],
    ]);
    deepStrictEqual(loaded.embeddings.map((e) => e.hash), loaded.files.map((f) => f.hash));
    deepStrictEqual(loaded.rows, Float32Array.from([...a, ...b]));
    const none = await loadEmbeddings([], 49408);
    deepStrictEqual([none.embeddings, none.rows.length, none.width], [[], 0, undefined]);

    await write(join(dir, "wide.safetensors"), [1, 8], 0);
    await rejects(
      loadEmbeddings([
        { path: join(dir, "a.safetensors"), name: "a" },
        { path: join(dir, "wide.safetensors"), name: "wide" },
      ], 49408),
      /wide\.safetensors: vectors of width 8, where .*a\.safetensors has 4/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
