import { deepStrictEqual, rejects, strictEqual } from "node:assert";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { safetensorsBytes, torchFileBytes } from "../checkpoint/testing.ts";
import { encodeSafetensors } from "../../tests/fixtures/builder/lora.ts";
import {
  EmbeddingFileError,
  embeddingStem,
  embeddingVectors,
  loadEmbeddingFile,
  MAX_EMBEDDING_FILE_BYTES,
  SD15_EMBEDDING_WIDTH,
} from "./embedding_file.ts";

const W = SD15_EMBEDDING_WIDTH;

/** Values exactly representable in float16 (k/8 in [-4, 4)), so F16 files round-trip. */
function values(n: number, seed: number): Float32Array {
  return Float32Array.from({ length: n }, (_, i) => (((i * 7 + seed * 13) % 64) - 32) / 8);
}

async function withDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "embedding_file_" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

function sha12(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex").slice(0, 12);
}

Deno.test("loadEmbeddingFile: emb_params [n, 768] in .safetensors, named by the file's stem", async () => {
  await withDir(async (dir) => {
    const data = values(3 * W, 1);
    const bytes = encodeSafetensors([{ name: "emb_params", dtype: "F32", shape: [3, W], data }]);
    const path = join(dir, "EasyNegative.safetensors");
    await Deno.writeFile(path, bytes);
    const e = await loadEmbeddingFile(path);
    strictEqual(e.name, "EasyNegative");
    strictEqual(e.path, path);
    strictEqual(e.count, 3);
    strictEqual(e.width, W);
    strictEqual(e.format, "safetensors");
    deepStrictEqual(e.vectors, data);
    strictEqual(e.hash, sha12(bytes));
    strictEqual(e.hash.length, 12);
    // A configured name replaces the stem.
    strictEqual((await loadEmbeddingFile(path, "my-style")).name, "my-style");
  });
});

Deno.test("loadEmbeddingFile: diffusers' learned_embeds {token: [768]} is one vector (F16 too)", async () => {
  await withDir(async (dir) => {
    const data = values(W, 2);
    const path = join(dir, "learned_embeds.safetensors");
    await Deno.writeFile(
      path,
      encodeSafetensors([{ name: "<cat-toy>", dtype: "F16", shape: [W], data }]),
    );
    const e = await loadEmbeddingFile(path, "cat-toy");
    strictEqual(e.name, "cat-toy");
    strictEqual(e.count, 1);
    strictEqual(e.width, W);
    strictEqual(e.format, "diffusers-concept");
    deepStrictEqual(e.vectors, data);
  });
});

Deno.test("loadEmbeddingFile: another width is read and reported (the text encoder judges it)", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "sd2.safetensors");
    await Deno.writeFile(
      path,
      encodeSafetensors([{
        name: "emb_params",
        dtype: "F32",
        shape: [2, 1024],
        data: values(2048, 3),
      }]),
    );
    const e = await loadEmbeddingFile(path);
    strictEqual(e.width, 1024);
    strictEqual(e.count, 2);
  });
});

Deno.test("embeddingVectors: AUTOMATIC1111's string_to_param, as a pickle reader names it", async () => {
  const data = values(2 * W, 4);
  const found = await embeddingVectors(
    new Map([["string_to_param.*", { shape: [2, W], read: () => data }]]),
    "bad-hands-5.pt",
  );
  strictEqual(found.format, "a1111-pt");
  strictEqual(found.count, 2);
  strictEqual(found.vectors, data);
  await rejects(
    embeddingVectors(
      new Map([
        ["string_to_param.*", { shape: [1, W], read: () => new Float32Array(W) }],
        ["string_to_param.x", { shape: [1, W], read: () => new Float32Array(W) }],
      ]),
      "two.pt",
    ),
    /two\.pt: the embedding file has multiple terms in it \(string_to_param holds 2\)/,
  );
});

/** Writes `entries` as `name`, then expects loadEmbeddingFile to refuse it with `pattern`. */
async function refused(
  name: string,
  bytes: Uint8Array,
  pattern: RegExp,
): Promise<void> {
  await withDir(async (dir) => {
    const path = join(dir, name);
    await Deno.writeFile(path, bytes);
    await rejects(loadEmbeddingFile(path), (e: unknown) => {
      strictEqual(e instanceof EmbeddingFileError, true, String(e));
      const message = (e as Error).message;
      strictEqual(message.startsWith(path), true, message);
      strictEqual(pattern.test(message), true, message);
      return true;
    });
  });
}

const one = (name: string, shape: number[], n = shape.reduce((a, b) => a * b, 1)) => ({
  name,
  dtype: "F32" as const,
  shape,
  data: values(n, 5),
});

Deno.test("loadEmbeddingFile: refuses what is not one SD 1.x embedding, naming what it found", async () => {
  await refused(
    "xl.safetensors",
    encodeSafetensors([one("clip_g", [2, 1280]), one("clip_l", [2, W])]),
    /an SDXL embedding \(clip_l and clip_g/,
  );
  await refused(
    "two.safetensors",
    encodeSafetensors([one("a", [1, W]), one("b", [1, W])]),
    /multiple terms in it \(2 tensors: "a", "b"\)/,
  );
  await refused("none.safetensors", encodeSafetensors([]), /holds no tensor/);
  await refused(
    "cube.safetensors",
    encodeSafetensors([one("emb_params", [1, 2, W])]),
    /tensor "emb_params" has shape \[1, 2, 768\]; an embedding is \[n, width\]/,
  );
  await refused(
    "long.safetensors",
    encodeSafetensors([one("emb_params", [76, 8])]),
    /76 vectors; a prompt chunk holds at most 75/,
  );
  await refused(
    "nan.safetensors",
    encodeSafetensors([{
      name: "emb_params",
      dtype: "F32",
      shape: [1, 2],
      data: new Float32Array([0, NaN]),
    }]),
    /NaN or infinite/,
  );
  await refused(
    "junk.safetensors",
    new TextEncoder().encode("not a safetensors file"),
    /not a valid safetensors file/,
  );
  await refused("x.ckpt", new Uint8Array(8), /ends in \.safetensors, \.pt, \.bin; got "\.ckpt"/);
  // Told apart by its first bytes: neither a safetensors header, a zip nor a pickle.
  await refused(
    "junk.pt",
    new TextEncoder().encode("not a pickle"),
    /junk\.pt: not a weights file \(its first bytes are neither/,
  );
  await refused(
    "ids.safetensors",
    safetensorsBytes([["emb_params", { dtype: "I64", shape: [1, 4], data: new Float32Array(4) }]]),
    /tensor "emb_params" holds I64 values; an embedding holds floats/,
  );
});

Deno.test("loadEmbeddingFile: a missing file and a file too big to be an embedding", async () => {
  await withDir(async (dir) => {
    await rejects(
      loadEmbeddingFile(join(dir, "gone.safetensors")),
      /gone\.safetensors: embedding file not found/,
    );
    const big = join(dir, "model.safetensors");
    using f = await Deno.open(big, { create: true, write: true });
    await f.truncate(MAX_EMBEDDING_FILE_BYTES + 1);
    await rejects(
      loadEmbeddingFile(big),
      /too big for a textual-inversion embedding .* a checkpoint or a LoRA\?/,
    );
  });
});

Deno.test("embeddingStem: the file name without its last extension, as AUTOMATIC1111 names it", () => {
  strictEqual(embeddingStem("/m/embeddings/EasyNegative.safetensors"), "EasyNegative");
  strictEqual(embeddingStem("verybadimagenegative_v1.3.pt"), "verybadimagenegative_v1.3");
  strictEqual(embeddingStem("bad-hands-5.pt"), "bad-hands-5");
});

Deno.test("loadEmbeddingFile: AUTOMATIC1111's .pt (string_to_param), zip and legacy format", async () => {
  await withDir(async (dir) => {
    const data = values(2 * W, 6);
    // What AUTOMATIC1111's Embedding.save writes: the vectors under string_to_param["*"], the
    // placeholder's id, and training facts that carry no vector.
    const value = {
      dict: [
        ["string_to_token", { dict: [["*", 265]] }],
        [
          "string_to_param",
          { dict: [["*", { tensor: { dtype: "F32", shape: [2, W], data }, parameter: true }]] },
        ],
        ["name", "bad-hands-5"],
        ["step", 1500],
        ["sd_checkpoint", "7460a6fa"],
        ["sd_checkpoint_name", "v1-5-pruned-emaonly"],
      ],
    } as const;
    for (const legacy of [false, true]) {
      const bytes = await torchFileBytes(value as never, { legacy });
      const path = join(dir, `bad-hands-5${legacy ? "-legacy" : ""}.pt`);
      await Deno.writeFile(path, bytes);
      const e = await loadEmbeddingFile(path);
      strictEqual(e.name, legacy ? "bad-hands-5-legacy" : "bad-hands-5");
      strictEqual(e.format, "a1111-pt");
      strictEqual(e.count, 2);
      strictEqual(e.width, W);
      deepStrictEqual(e.vectors, data);
      strictEqual(e.hash, sha12(bytes));
    }
  });
});

Deno.test("loadEmbeddingFile: diffusers' learned_embeds.bin ({token: [768]}, F16)", async () => {
  await withDir(async (dir) => {
    const data = values(W, 7);
    const bytes = await torchFileBytes({
      dict: [["<cat-toy>", { tensor: { dtype: "F16", shape: [W], data } }]],
    });
    const path = join(dir, "learned_embeds.bin");
    await Deno.writeFile(path, bytes);
    const e = await loadEmbeddingFile(path, "cat-toy");
    strictEqual(e.format, "diffusers-concept");
    strictEqual(e.count, 1);
    deepStrictEqual(e.vectors, data);
    strictEqual(e.hash, sha12(bytes));
  });
});

Deno.test("embeddingVectors: string_to_token without string_to_param (a ParameterDict) is refused", async () => {
  await rejects(
    embeddingVectors(
      new Map([["string_to_token.*", { shape: [], read: () => new Float32Array(1) }]]),
      "old.pt",
    ),
    /old\.pt: string_to_token but no string_to_param tensor \(a torch ParameterDict/,
  );
});
