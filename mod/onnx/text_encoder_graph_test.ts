import { deepStrictEqual, ok, rejects, strictEqual } from "node:assert";
import { buildTextEncoder, CLIP_VOCAB_SIZE, TINY_DIMS } from "../../tests/fixtures/builder/mod.ts";
import type { ExportOptions } from "../../tests/fixtures/builder/options.ts";
import { maxAbsDiff } from "../../tests/fixtures/builder/testing.ts";
import { createSessionFromBytes, intTensor, toFloat32 } from "./mod.ts";
import {
  rewriteTextEncoder,
  TextEncoderGraphError,
  textEncoderRewriteName,
  tokenTable,
} from "./text_encoder_graph.ts";

const D = TINY_DIMS.hiddenSize;
const SEED = 11;

function encoder(o: Partial<ExportOptions> = {}): Uint8Array {
  return buildTextEncoder(SEED, TINY_DIMS, { flavour: "diffusers", io: "float32", ...o }).model;
}

/** Ids of two prompts: BOS, some tokens, EOS padding. */
function ids(extra: number[] = []): Int32Array {
  const a = new Int32Array(77).fill(49407);
  a[0] = 49406;
  [320, 1929, 539, 1125, ...extra].forEach((t, i) => (a[1 + i] = t));
  return a;
}

async function hidden(model: Uint8Array, input: Int32Array): Promise<Float32Array> {
  const session = await createSessionFromBytes(model, [], { intraOpThreads: 1 });
  try {
    const out = await session.run(
      { input_ids: intTensor("int32", input, [1, input.length]) },
      ["last_hidden_state"],
    );
    return toFloat32(out.last_hidden_state);
  } finally {
    await session.release();
  }
}

for (const norm of ["op", "decomposed"] as const) {
  Deno.test(`clip skip 2 (final norm as ${norm}): the state one layer earlier through the final layer norm`, async () => {
    const three = encoder({ textEncoderLayers: 3, textEncoderNorm: norm });
    const two = encoder({ textEncoderLayers: 2, textEncoderNorm: norm });
    const one = encoder({ textEncoderLayers: 1, textEncoderNorm: norm });
    const skip2 = await rewriteTextEncoder(three, { clipSkip: 2 });
    strictEqual(skip2.layers, 3);
    strictEqual(skip2.layerNorm, norm === "op" ? "LayerNormalization" : "decomposed");
    const skip3 = await rewriteTextEncoder(three, { clipSkip: 3 });
    const x = ids();
    const full = await hidden(three, x);
    const expected2 = await hidden(two, x);
    const expected1 = await hidden(one, x);
    ok(maxAbsDiff(full, expected2) > 1e-2, "the last layer changes the output");
    ok(maxAbsDiff(await hidden(skip2.model, x), expected2) < 1e-5);
    ok(maxAbsDiff(await hidden(skip3.model, x), expected1) < 1e-5);
    // Only last_hidden_state is left, and the layers past the skip are gone.
    const session = await createSessionFromBytes(skip2.model, [], { intraOpThreads: 1 });
    deepStrictEqual(session.outputs.map((o) => o.name), ["last_hidden_state"]);
    await session.release();
    ok(skip2.model.length < three.length);
  });
}

Deno.test("clip skip beyond the layers, or without a final norm, is refused with the count", async () => {
  await rejects(
    rewriteTextEncoder(encoder({ textEncoderLayers: 2 }), { clipSkip: 3 }),
    (e: Error) =>
      e instanceof TextEncoderGraphError && /clip_skip 3 needs at least 3 .* has 2/.test(e.message),
  );
  await rejects(
    rewriteTextEncoder(encoder(), { clipSkip: 2 }),
    (e: Error) => e instanceof TextEncoderGraphError && /final layer norm/.test(e.message),
  );
});

Deno.test("appended rows: ids from the vocabulary size on read the new vectors, other ids are unchanged", async () => {
  const model = encoder({ textEncoderLayers: 2 });
  deepStrictEqual(tokenTable(model).width, D);
  const rows = Float32Array.from({ length: 2 * D }, (_, i) => Math.sin(i) * 0.7);
  const rewritten = await rewriteTextEncoder(model, {
    clipSkip: 1,
    rows: [{ name: "two", values: rows, count: 2 }],
  });
  strictEqual(rewritten.table.rows, 1024);
  strictEqual(tokenTable(rewritten.model).rows, 1026);
  const plain = ids();
  ok(maxAbsDiff(await hidden(model, plain), await hidden(rewritten.model, plain)) === 0);
  const withRows = ids([CLIP_VOCAB_SIZE, CLIP_VOCAB_SIZE + 1]);
  const withWord = ids([1125, 1125]);
  const a = await hidden(rewritten.model, withRows);
  ok(maxAbsDiff(a, await hidden(rewritten.model, withWord)) > 1e-3);
  // Equal to the same graph whose table has those vectors at the rows the ids map to.
  const second = await rewriteTextEncoder(model, {
    clipSkip: 1,
    rows: [{ name: "two", values: Float32Array.from(rows).reverse(), count: 2 }],
  });
  ok(maxAbsDiff(a, await hidden(second.model, withRows)) > 1e-3, "the vectors decide the output");
  // Both rewrites at once.
  const both = await rewriteTextEncoder(model, {
    clipSkip: 2,
    rows: [{ name: "two", values: rows, count: 2 }],
  });
  ok(
    maxAbsDiff(
      await hidden(both.model, plain),
      await hidden(encoder({ textEncoderLayers: 1 }), plain),
    ) < 1e-5,
  );
});

Deno.test("appended rows of another width are refused naming both widths", async () => {
  await rejects(
    rewriteTextEncoder(encoder(), {
      clipSkip: 1,
      rows: [{ name: "wide", values: new Float32Array(2 * 48), count: 2 }],
    }),
    (e: Error) => /embedding "wide" has vectors of width 48; .* 32 wide/.test(e.message),
  );
});

Deno.test("textEncoderRewriteName: the clip skip and the rows' hash are in the cache key", () => {
  const a = textEncoderRewriteName(2, null);
  ok(a !== textEncoderRewriteName(1, null));
  ok(textEncoderRewriteName(2, "ab") !== textEncoderRewriteName(2, "cd"));
  ok(textEncoderRewriteName(2, "ab").includes("ab"));
});
