// End to end on the test-sized models: how `[prompt] syntax`, embeddings and clip skip
// reach the image.
import { deepStrictEqual, ok, rejects, strictEqual } from "node:assert";
import { join } from "node:path";
import { buildTextEncoder, TINY_DIMS } from "../../tests/fixtures/builder/mod.ts";
import {
  buildTinyLora,
  encodeSafetensors,
  tinyLoraModules,
} from "../../tests/fixtures/builder/lora.ts";
import { createHash } from "node:crypto";
import {
  differingBytes,
  recordingOpener,
  testPicture,
  tinyConfig,
  tinyModels,
} from "./_testing.ts";
import { ToolError } from "../mcp/tool.ts";
import { openCachedRewrite as openCachedDefault } from "../onnx/mod.ts";
import { createEngine } from "./engine.ts";
import type { EngineConfig, EnginePrompt } from "./engine_config.ts";
import { applyEmphasis, MAX_PROMPT_CHUNKS } from "./text_encoding.ts";
import type { GenerationRequest } from "./types.ts";

const root = await tinyModels("prompt-syntax");
const W = 64;
const H = 64;

function t2i(positive: string, negative = "blurry"): GenerationRequest {
  return { mode: "text_to_image", positive, negative, width: W, height: H, seed: 7 };
}

function config(prompt?: EnginePrompt, base: EngineConfig = tinyConfig(root)): EngineConfig {
  return prompt ? { ...base, prompt } : base;
}

const A1111: EnginePrompt = { syntax: "a1111", clipSkip: 1 };
const PLAIN: EnginePrompt = { syntax: "plain", clipSkip: 1 };

/** Distinct words, one CLIP token each (common English words). */
const WORDS = (
  "red green blue yellow house tree river mountain cat dog bird fish apple bread table chair " +
  "window door garden flower sky cloud rain snow sun moon star light dark stone wood glass metal " +
  "paper book pen road car train boat city village forest field lake sea beach island bridge " +
  "castle tower church market street night morning evening winter summer spring autumn old new " +
  "small large tall short warm cold soft hard bright quiet loud happy sad calm wild gold silver"
).split(" ");

/** AUTOMATIC1111's short hash of a file: the first 12 hex digits of its sha256. */
function sha12(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex").slice(0, 12);
}

/** A prompt of `n` one-token words (comma-free, so no back-off moves them). */
function words(n: number, offset = 0): string {
  return Array.from({ length: n }, (_, i) => WORDS[(i + offset) % WORDS.length]).join(" ");
}

Deno.test("a short prompt without brackets: the same pixels under plain and a1111", async () => {
  const plain = await createEngine(config(PLAIN));
  const a1111 = await createEngine(config(A1111));
  try {
    for (const prompt of ["a red apple on a wooden table", words(75)]) {
      const p = await plain.generate(t2i(prompt));
      const a = await a1111.generate(t2i(prompt));
      deepStrictEqual(a.image.data, p.image.data, prompt);
      deepStrictEqual(p.notes, []);
      deepStrictEqual(a.notes, []);
    }
  } finally {
    await plain.release();
    await a1111.release();
  }
});

Deno.test("a 150-token prompt: read whole under a1111 (each prompt at its own length), cut with a note under plain", async () => {
  const { open, runs } = recordingOpener();
  const a1111 = await createEngine(config(A1111), { openSession: open });
  const plain = await createEngine(config(PLAIN));
  try {
    const long = words(150);
    // The same first 75 tokens, other words after them.
    const other = `${words(75)} ${words(75, 40)}`;
    const a = await a1111.generate(t2i(long));
    deepStrictEqual(a.notes, [], "no truncation note");
    const text = runs.filter((r) => r.label === "text_encoder");
    strictEqual(text.length, 1, "one text-encoder run for every chunk");
    deepStrictEqual(text[0].feeds.input_ids.dims, [3, 77], "negative: 1 chunk, positive: 2");
    const unet = runs.filter((r) => r.label === "unet");
    strictEqual(unet.length, 8, "PNDM's 4 UNet calls, each as two batch-1 passes");
    for (const [i, r] of unet.entries()) {
      deepStrictEqual(r.feeds.sample.dims, [1, 4, H / 8, W / 8]);
      deepStrictEqual(r.feeds.encoder_hidden_states.dims, [1, i % 2 === 0 ? 77 : 154, 32]);
    }
    const b = await a1111.generate(t2i(other));
    ok(differingBytes(a.image, b.image) > 100, "words past 75 tokens change the image");

    const p = await plain.generate(t2i(long));
    strictEqual(p.notes.length, 1);
    ok(
      /positive prompt was truncated to 77 CLIP tokens \(152 given\)/.test(p.notes[0]),
      p.notes[0],
    );
    const q = await plain.generate(t2i(other));
    deepStrictEqual(q.image.data, p.image.data, "plain ignores what is past 75 tokens");

    // Equal lengths again: one batch-2 pass.
    runs.length = 0;
    await a1111.generate(t2i(long, words(90, 3)));
    for (const r of runs.filter((r) => r.label === "unet")) {
      deepStrictEqual(r.feeds.sample.dims, [2, 4, H / 8, W / 8]);
      deepStrictEqual(r.feeds.encoder_hidden_states.dims, [2, 154, 32]);
    }
  } finally {
    await a1111.release();
    await plain.release();
  }
});

Deno.test("a1111: a weight changes the image, and equals the emphasis applied to the plain encoding", async () => {
  const { open, runs } = recordingOpener();
  const engine = await createEngine(config(A1111), { openSession: open });
  const plain = await createEngine(config(PLAIN));
  try {
    const a = await engine.generate(t2i("a red apple on a wooden table"));
    const b = await engine.generate(t2i("a (red apple:1.5) on a wooden table"));
    ok(differingBytes(a.image, b.image) > 100, "the weight changes the image");
    // Under plain the brackets are text: not the weighted image.
    const c = await plain.generate(t2i("a (red apple:1.5) on a wooden table"));
    ok(differingBytes(b.image, c.image) > 100);
    // The UNet got the unweighted states with positions 2-3 ×1.5 and the mean restored.
    const unet = runs.filter((r) => r.label === "unet");
    const first = unet[0].feeds.encoder_hidden_states.data!;
    const weighted = unet[4].feeds.encoder_hidden_states.data!;
    const expected = first.slice(77 * 32);
    const m = new Array(77).fill(1);
    m[2] = m[3] = 1.5;
    applyEmphasis(expected, m);
    deepStrictEqual(weighted.slice(77 * 32), expected);
    deepStrictEqual(weighted.slice(0, 77 * 32), first.slice(0, 77 * 32), "negative unchanged");
  } finally {
    await engine.release();
    await plain.release();
  }
});

Deno.test("a1111: a weight that is not a number is an input error naming the prompt; the engine goes on", async () => {
  const engine = await createEngine(config(A1111));
  try {
    await rejects(engine.generate(t2i("a (cat:1.2.3) on a mat")), (e: Error) => {
      ok(e instanceof ToolError && e.category === "input", String(e));
      return /positive_prompt: prompt weight "1\.2\.3"/.test(e.message);
    });
    await rejects(
      engine.generate(t2i("a cat", "(dog:.)")),
      (e: Error) => e instanceof ToolError && /negative_prompt/.test(e.message),
    );
    strictEqual((await engine.generate(t2i("a cat"))).image.width, W);
  } finally {
    await engine.release();
  }
});

Deno.test("a1111: a prompt of more chunks than MAX_PROMPT_CHUNKS is an input error naming it; the engine goes on", async () => {
  const engine = await createEngine(config(A1111));
  try {
    // Every BREAK followed by more text ends a chunk, empty or not: one chunk more than the bound.
    const breaks = Array(MAX_PROMPT_CHUNKS).fill("BREAK").join(" ");
    await rejects(engine.generate(t2i("a cat", `dog ${breaks} bird`)), (e: Error) => {
      ok(e instanceof ToolError && e.category === "input", String(e));
      return new RegExp(`^negative_prompt: reads as ${MAX_PROMPT_CHUNKS + 1} chunks`).test(
        e.message,
      );
    });
    // At the bound itself it is read (and denoised at its own length).
    const atBound = Array(MAX_PROMPT_CHUNKS - 1).fill("BREAK").join(" ");
    strictEqual((await engine.generate(t2i(`a cat ${atBound} bird`))).image.width, W);
  } finally {
    await engine.release();
  }
});

Deno.test("applyEmphasis: weights per position, the chunk's mean kept; all-1 weights change nothing", () => {
  const z = Float32Array.from({ length: 3 * 2 }, (_, i) => i - 1.5);
  const same = Float32Array.from(z);
  applyEmphasis(same, [1, 1, 1]);
  deepStrictEqual(same, z);
  const w = Float32Array.from(z);
  applyEmphasis(w, [1, 2, 1]);
  // z = [-1.5,-0.5 | 0.5,1.5 | 2.5,3.5], mean 1; ×[1,2,1] → sum 8, mean 8/6.
  const factor = Math.fround(1 / Math.fround(8 / 6));
  deepStrictEqual(
    Array.from(w),
    [-1.5, -0.5, 1, 3, 2.5, 3.5].map((v) => Math.fround(v * factor)),
  );
});

Deno.test("embeddings: the word calls the vectors and changes the image; a word without one stays text", async () => {
  const vectors = Float32Array.from({ length: 2 * 32 }, (_, i) => Math.sin(i * 0.9) * 0.8);
  const withEmbedding: EnginePrompt = {
    syntax: "a1111",
    clipSkip: 1,
    embeddings: [{ name: "shinystyle", vectors, count: 2, hash: "0123456789ab" }],
  };
  const { open, openBytes, runs } = recordingOpener();
  const engine = await createEngine(config(withEmbedding), { openSession: open, openBytes });
  const without = await createEngine(config(A1111));
  try {
    const a = await engine.generate(t2i("a house in shinystyle"));
    deepStrictEqual(a.embeddingsUsed, [{ name: "shinystyle", hash: "0123456789ab" }]);
    const ids = runs.find((r) => r.label === "text_encoder")!.feeds.input_ids.ints!;
    deepStrictEqual(ids.slice(77 + 4, 77 + 6), [49408, 49409], "the rows' ids in the word's place");
    const b = await without.generate(t2i("a house in shinystyle"));
    deepStrictEqual(b.embeddingsUsed, []);
    ok(differingBytes(a.image, b.image) > 100, "the embedding's word changes the image");
    const c = await engine.generate(t2i("a house in shinystyled"));
    const d = await without.generate(t2i("a house in shinystyled"));
    deepStrictEqual(c.image.data, d.image.data, "another word stays text");
    deepStrictEqual(c.embeddingsUsed, []);
    // Under plain the embeddings are not read: the word is text.
    const plain = await createEngine(config({ ...withEmbedding, syntax: "plain" }));
    try {
      const e = await plain.generate(t2i("a house in shinystyle"));
      const f = await without.generate(t2i("a house in shinystyle"));
      deepStrictEqual(e.image.data, f.image.data);
    } finally {
      await plain.release();
    }
  } finally {
    await engine.release();
    await without.release();
  }
});

Deno.test("an embedding file from [prompt] embeddings: the same image as its vectors given directly", async () => {
  const vectors = Float32Array.from({ length: 3 * 32 }, (_, i) => Math.cos(i * 0.7) * 0.6);
  const dir = await Deno.makeTempDir();
  const path = join(dir, "glowpunk.safetensors");
  const bytes = encodeSafetensors([{
    name: "emb_params",
    dtype: "F32",
    shape: [3, 32],
    data: vectors,
  }]);
  await Deno.writeFile(path, bytes);
  const fromFile = await createEngine(
    config({ syntax: "a1111", clipSkip: 1, embeddingFiles: [{ path, name: "glowpunk" }] }),
  );
  const direct = await createEngine(
    config({ syntax: "a1111", clipSkip: 1, embeddings: [{ name: "glowpunk", vectors, count: 3 }] }),
  );
  const without = await createEngine(config(A1111));
  try {
    const request = t2i("glowpunk, a castle by the sea", "glowpunk");
    const a = await fromFile.generate(request);
    const b = await direct.generate(request);
    const c = await without.generate(request);
    deepStrictEqual(a.image.data, b.image.data);
    deepStrictEqual(a.embeddingsUsed, [{ name: "glowpunk", hash: sha12(bytes) }]);
    ok(differingBytes(a.image, c.image) > 100);
  } finally {
    await fromFile.release();
    await direct.release();
    await without.release();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("embeddings of another width are refused at start-up in one line naming the embedding", async () => {
  const bad: EnginePrompt = {
    syntax: "a1111",
    clipSkip: 1,
    embeddings: [{ name: "sdxlthing", vectors: new Float32Array(2 * 48), count: 2 }],
  };
  await rejects(createEngine(config(bad)), (e: Error) => {
    ok(!e.message.includes("\n"), e.message);
    return /text_encoder.*embedding "sdxlthing" has vectors of width 48; .* 32 wide/.test(
      e.message,
    );
  });
});

/** The tiny set with a CLIP-shaped text encoder of `layers` layers, in its own folder. */
async function layeredSet(layers: number): Promise<string> {
  const dir = join(root, `..`, `layered-${layers}`);
  const base = join(dir, "sd15");
  await Deno.mkdir(join(base, "text_encoder"), { recursive: true });
  for (const part of ["unet", "vae_decoder", "vae_encoder", "tokenizer", "scheduler"]) {
    await Deno.remove(join(base, part)).catch(() => {});
    await Deno.symlink(join(root, "sd15", part), join(base, part));
  }
  const built = buildTextEncoder(5, TINY_DIMS, {
    flavour: "diffusers",
    io: "float32",
    textEncoderLayers: layers,
  });
  await Deno.writeFile(join(base, "text_encoder", "model.onnx"), built.model);
  return base;
}

Deno.test("clip skip 2 gives the image of the same text encoder one layer shorter", async () => {
  const three = await layeredSet(3);
  const two = await layeredSet(2);
  const at = (base: string, clipSkip: number, syntax: "a1111" | "plain" = "a1111") => {
    const c = tinyConfig(root);
    return createEngine({
      ...c,
      models: { ...c.models, base },
      prompt: { syntax, clipSkip },
    });
  };
  const skip = await at(three, 2);
  const full = await at(three, 1);
  const shorter = await at(two, 1);
  const plainSkip = await at(three, 2, "plain");
  const plainShorter = await at(two, 1, "plain");
  try {
    const request = t2i("a (red apple:1.2) on a wooden table");
    const a = await skip.generate(request);
    const b = await shorter.generate(request);
    const c = await full.generate(request);
    deepStrictEqual(a.image.data, b.image.data);
    ok(differingBytes(a.image, c.image) > 100, "clip skip changes the image");
    // Clip skip applies under plain as well.
    const d = await plainSkip.generate(request);
    deepStrictEqual(d.image.data, (await plainShorter.generate(request)).image.data);
    ok(differingBytes(a.image, d.image) > 100, "plain reads the brackets as text");
  } finally {
    for (const e of [skip, full, shorter, plainSkip, plainShorter]) await e.release();
  }
  // A text encoder without a final layer norm cannot skip: one line at start-up.
  await rejects(
    createEngine(config({ syntax: "a1111", clipSkip: 2 })),
    (e: Error) => /text_encoder.*final layer norm/.test(e.message) && !e.message.includes("\n"),
  );
});

Deno.test("LoRAs blended at load and clip skip together: the LoRA's text-encoder update, then the skip", async () => {
  const three = await layeredSet(3);
  const dir = await Deno.makeTempDir();
  const path = join(dir, "te.safetensors");
  // Only the text encoder's module (layers.0 fc1), so the image changes through the text alone.
  await Deno.writeFile(
    path,
    buildTinyLora(3, { modules: tinyLoraModules().filter((m) => m.key.startsWith("lora_te_")) }),
  );
  const at = (clipSkip: number, lora: boolean) => {
    const c = tinyConfig(root);
    return createEngine({
      ...c,
      models: { ...c.models, base: three },
      prompt: { syntax: "a1111", clipSkip },
      lora: { files: lora ? [{ path, weight: 1 }] : [] },
    });
  };
  const engines = [await at(2, true), await at(2, false), await at(1, true)];
  try {
    const request = t2i("a lighthouse on a cliff");
    const both = await engines[0].generate(request);
    const skipOnly = await engines[1].generate(request);
    const loraOnly = await engines[2].generate(request);
    ok(differingBytes(both.image, skipOnly.image) > 100, "the LoRA is blended under clip skip");
    ok(differingBytes(both.image, loraOnly.image) > 100, "the skip applies with a LoRA");
  } finally {
    for (const e of engines) await e.release();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("optimised-graph cache: the rewritten text encoder is found by the file and the rewrite's name; other embeddings get their own", async () => {
  const three = await layeredSet(3);
  const cache = await Deno.makeTempDir({ prefix: "sd15-te-rewrite-" });
  const hits: string[] = [];
  const openCachedRewrite = async (
    model: { path: string; rewrite: string },
    options: Parameters<typeof openCachedDefault>[2],
  ) => {
    const session = await openCachedDefault(model.path, model.rewrite, options);
    if (session && model.path.includes("text_encoder")) hits.push(model.rewrite);
    return session;
  };
  const vectors = (phase: number) =>
    Float32Array.from({ length: 32 }, (_, i) => Math.sin(i + phase) * 0.5);
  const at = (phase: number) => {
    const c = tinyConfig(root);
    return createEngine({
      ...c,
      models: { ...c.models, base: three },
      runtime: { ...c.runtime, optimizedCache: cache },
      prompt: {
        syntax: "a1111",
        clipSkip: 2,
        embeddings: [{ name: "inkwash", vectors: vectors(phase), count: 1 }],
      },
    }, { openCachedRewrite });
  };
  try {
    const images = [];
    for (const phase of [0, 0, 1]) {
      const engine = await at(phase);
      try {
        images.push((await engine.generate(t2i("a boat, inkwash"))).image);
      } finally {
        await engine.release();
      }
    }
    strictEqual(hits.length, 1, "the second start found the first one's graph, the third did not");
    ok(/clip skip 2, rows [0-9a-f]{64}/.test(hits[0]), hits[0]);
    deepStrictEqual(images[1].data, images[0].data);
    ok(differingBytes(images[2], images[0]) > 100, "other vectors, another graph");
  } finally {
    await Deno.remove(cache, { recursive: true });
  }
});

Deno.test("prompts of different lengths: guided (ControlNet) and image-to-image run each at its own length", async () => {
  const base = tinyConfig(root, { controlnets: { inpaint: 0.5 } });
  const { open, openBytes, runs } = recordingOpener();
  const engine = await createEngine(
    { ...base, prompt: A1111, imageToImage: { strengths: [] } },
    { openSession: open, openBytes },
  );
  try {
    const mask = {
      width: W,
      height: H,
      data: new Uint8Array(W * H).fill(0).map((_, i) => i % W > W / 2 ? 255 : 0),
    };
    const long = words(100);
    const inpaint = await engine.generate({
      mode: "inpaint_image",
      positive: long,
      negative: "blurry",
      width: W,
      height: H,
      seed: 3,
      image: testPicture(W, H),
      mask,
    } as GenerationRequest);
    deepStrictEqual(inpaint.notes, []);
    const cn = runs.filter((r) => r.label === "controlnet");
    ok(cn.length > 0);
    for (const [i, r] of cn.entries()) {
      deepStrictEqual(r.feeds.encoder_hidden_states.dims, [1, i % 2 === 0 ? 77 : 154, 32]);
      deepStrictEqual(r.feeds.controlnet_cond.dims, [1, 3, H, W]);
    }
    runs.length = 0;
    const other = await engine.generate({
      mode: "inpaint_image",
      positive: `${words(75)} ${words(25, 50)}`,
      negative: "blurry",
      width: W,
      height: H,
      seed: 3,
      image: testPicture(W, H),
      mask,
    } as GenerationRequest);
    ok(differingBytes(inpaint.image, other.image) > 0, "the second chunk guides the inpainting");

    runs.length = 0;
    const i2i = await engine.generate({
      mode: "image_to_image",
      positive: long,
      negative: "",
      width: W,
      height: H,
      seed: 3,
      image: testPicture(W, H),
      strength: 0.7,
    } as GenerationRequest);
    strictEqual(i2i.image.width, W);
    const unet = runs.filter((r) => r.label === "unet");
    ok(unet.length > 0);
    for (const r of unet) deepStrictEqual(r.feeds.sample.dims, [1, 4, H / 8, W / 8]);
  } finally {
    await engine.release();
  }
});
