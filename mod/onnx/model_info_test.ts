import { deepStrictEqual, ok, rejects, strictEqual } from "node:assert";
import { join } from "node:path";
import { ModelFormatError, readModelInfo } from "./model_info.ts";
import { createSession } from "./runtime.ts";

const ROOT = new URL("../../tests/fixtures/tiny/models/", import.meta.url).pathname;

async function onnxFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(dir)) {
    const p = join(dir, e.name);
    if (e.isDirectory) out.push(...await onnxFiles(p));
    else if (e.name.endsWith(".onnx")) out.push(p);
  }
  return out.sort();
}

Deno.test("readModelInfo: the same I/O as ONNX Runtime reports, for every tiny model", async () => {
  const files = await onnxFiles(ROOT);
  ok(files.length >= 20, `found ${files.length} models`);
  for (const path of files) {
    const info = await readModelInfo(path);
    const session = await createSession(path, { intraOpThreads: 1 });
    try {
      deepStrictEqual(info.inputs, session.inputs, path);
      deepStrictEqual(info.outputs, session.outputs, path);
    } finally {
      await session.release();
    }
  }
});

Deno.test("readModelInfo: external data files and how far into them the model reads", async () => {
  const diffusers = await readModelInfo(join(ROOT, "sd15/unet/model.onnx"));
  strictEqual(diffusers.externalData.length, 1);
  strictEqual(diffusers.externalData[0].location, "weights.pb");
  strictEqual(
    diffusers.externalData[0].end,
    (await Deno.stat(join(ROOT, "sd15/unet/weights.pb"))).size,
  );
  const optimum = await readModelInfo(join(ROOT, "sd15-optimum/unet/model.onnx"));
  strictEqual(optimum.externalData[0].location, "model.onnx_data");
  deepStrictEqual(
    (await readModelInfo(join(ROOT, "sd15/vae_decoder/model.onnx"))).externalData,
    [],
  );
});

Deno.test("readModelInfo: the pre-packed weight buffers of a graph ONNX Runtime saved with them", async () => {
  const dir = await Deno.makeTempDir({ prefix: "model_info_" });
  try {
    const path = join(dir, "model.onnx");
    const session = await createSession(join(ROOT, "sd15/unet/model.onnx"), {
      intraOpThreads: 1,
      saveOptimized: { path, externalData: "model.onnx.data", prepacked: true },
    });
    await session.release();
    const info = await readModelInfo(path);
    const size = (await Deno.stat(join(dir, "model.onnx.data"))).size;
    ok(info.prepacked.length > 0);
    let end = 0;
    for (const blob of info.prepacked) {
      strictEqual(blob.location, "model.onnx.data");
      ok(/^[A-Za-z]+\+\d+$/.test(blob.key), blob.key);
      ok(blob.length > 0 && blob.offset >= end, `${blob.tensor}: no overlap`);
      end = blob.offset + blob.length;
    }
    ok(end <= size, `the last buffer ends at ${end}, in a file of ${size} bytes`);
    // Without them: none.
    deepStrictEqual((await readModelInfo(join(ROOT, "sd15/unet/model.onnx"))).prepacked, []);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("readModelInfo: a truncated or foreign file is refused with the byte counts", async () => {
  const dir = await Deno.makeTempDir({ prefix: "model_info_" });
  try {
    const bytes = await Deno.readFile(join(ROOT, "sd15/text_encoder/model.onnx"));
    const cut = join(dir, "model.onnx");
    await Deno.writeFile(cut, bytes.subarray(0, Math.floor(bytes.length / 2)));
    await rejects(readModelInfo(cut), (e: Error) => {
      ok(e instanceof ModelFormatError);
      ok(/truncated/.test(e.message) && e.message.includes("bytes"), e.message);
      return true;
    });
    const json = join(dir, "other.onnx");
    await Deno.writeTextFile(json, '{"not": "onnx"}');
    await rejects(readModelInfo(json), ModelFormatError);
    await Deno.writeFile(json, new Uint8Array(0));
    await rejects(readModelInfo(json), /no graph/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
