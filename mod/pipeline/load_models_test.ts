import { deepStrictEqual, ok, strictEqual, throws } from "node:assert";
import { join } from "node:path";
import { OPTIMIZED_RECORD } from "../onnx/optimized_cache.ts";
import { tinyConfig, tinyModels } from "./_testing.ts";
import { createSession, createSessionFromBytes, type SessionOptions } from "../onnx/mod.ts";
import { TINY_VAE_DECODER_PATH } from "../../tests/fixtures/builder/mod.ts";
import { createEngine } from "./engine.ts";
import { checkSequenceAxis } from "./load_models.ts";
import type { EngineConfig } from "./engine_config.ts";
import type { GenerationRequest } from "./types.ts";

const root = await tinyModels("load_models");

const REQUEST: GenerationRequest = {
  mode: "text_to_image",
  positive: "a lighthouse at dusk",
  negative: "",
  width: 64,
  height: 64,
  seed: 7,
};

async function cachedFolders(cache: string): Promise<string[]> {
  const names: string[] = [];
  for await (const e of Deno.readDir(cache)) if (e.isDirectory) names.push(e.name);
  return names.sort();
}

Deno.test("warm start: the engine keeps each model's optimised graph; the next engine opens those and draws the same image", async () => {
  const cache = await Deno.makeTempDir({ prefix: "sd15-optimized-" });
  try {
    const config = tinyConfig(root);
    config.runtime.optimizedCache = cache;
    // Loads the VAE encoder too, which the tiny set's export samples in the graph: rewritten in
    // memory at the first load, its graph is cached by the file and the rewrite's name, and the
    // next engine opens it without rewriting.
    config.imageToImage = { strengths: [] };
    const cold = await createEngine(config);
    let first;
    try {
      first = await cold.generate(REQUEST);
    } finally {
      await cold.release();
    }
    const folders = await cachedFolders(cache);
    deepStrictEqual(folders.map((f) => f.replace(/-[0-9a-f]{8}-[0-9a-f]{16}$/, "")), [
      "text_encoder",
      "unet",
      "vae_decoder",
      "vae_encoder",
    ]);
    const used = async () =>
      await Promise.all(
        folders.map(async (f) =>
          (await Deno.stat(join(cache, f, OPTIMIZED_RECORD))).mtime!.getTime()
        ),
      );
    const before = await used();
    await new Promise((r) => setTimeout(r, 20));

    const warm = await createEngine(config);
    try {
      const again = await warm.generate(REQUEST);
      deepStrictEqual(again.image.data, first.image.data, "the cached graphs draw the same pixels");
    } finally {
      await warm.release();
    }
    deepStrictEqual(await cachedFolders(cache), folders, "nothing rebuilt");
    const after = await used();
    ok(after.every((t, i) => t > before[i]), "each cached graph was opened (its record touched)");

    // The plain engine (no cache) agrees as well.
    const plain = await createEngine(tinyConfig(root));
    try {
      strictEqual(
        (await plain.generate(REQUEST)).image.data.join(),
        first.image.data.join(),
      );
    } finally {
      await plain.release();
    }
  } finally {
    await Deno.remove(cache, { recursive: true });
  }
});

Deno.test("session memory: the text encoder, UNet and tiny VAE decoder get the every-image settings, other sessions the others", async () => {
  const seen: Record<string, { arena?: boolean; pattern?: boolean }> = {};
  const note = (o: SessionOptions) =>
    seen[o.label ?? "?"] = { arena: o.cpuMemArena, pattern: o.memoryPattern };
  const base = tinyConfig(root);
  const config: EngineConfig = {
    ...base,
    models: {
      ...base.models,
      vaeDecoder: "tiny",
      tinyVaeDecoder: join(root, TINY_VAE_DECODER_PATH),
    },
    runtime: { ...base.runtime, imageSessions: { cpuMemArena: true, memoryPattern: false } },
    imageToImage: { strengths: [] },
  };
  const engine = await createEngine(config, {
    openSession: (path, o) => (note(o), createSession(path, o)),
    openBytes: (m, o) => (note(o), createSessionFromBytes(m.bytes, m.externalData, o)),
  });
  try {
    // It still draws: the sessions' memory settings change where memory lives, not the result.
    const image = await engine.generate(REQUEST);
    strictEqual(image.image.width, 64);
  } finally {
    await engine.release();
  }
  const kept = { arena: true, pattern: false };
  const given = { arena: false, pattern: true };
  deepStrictEqual(seen, {
    text_encoder: kept,
    unet: kept,
    vae_decoder: kept,
    vae_encoder: given,
  });
  // With the full VAE decoder, the decoder is not one of them.
  let decoder: SessionOptions | undefined;
  const full = await createEngine({ ...config, models: base.models }, {
    openSession: (path, o) => {
      if (o.label === "vae_decoder") decoder = o;
      return createSession(path, o);
    },
  });
  await full.release();
  deepStrictEqual([decoder?.cpuMemArena, decoder?.memoryPattern], [false, true]);
});

Deno.test("checkSequenceAxis: a fixed encoder_hidden_states sequence is refused under a1111, naming the way out", () => {
  const model = (shape: Array<number | string>) => ({
    path: "/m/unet/model.onnx",
    io: {
      component: "unet" as const,
      inputs: { encoder_hidden_states: { name: "encoder_hidden_states", dtype: "float32", shape } },
      outputs: {},
    },
  });
  checkSequenceAxis(model(["batch", "sequence", 768]));
  throws(
    () => checkSequenceAxis(model(["batch", 77, 768])),
    /unet\/model\.onnx: unet input `encoder_hidden_states` has a fixed sequence length 77; .*syntax = "plain"/,
  );
});
