import assert from "node:assert/strict";
import { readPrompt } from "../mod/prompt/mod.ts";
import { ClipTokenizer, writeClipTokenizerFiles } from "../mod/tokenizer/mod.ts";
import {
  EMBEDDING_VECTORS,
  EMBEDDING_WORD,
  embeddingVectors,
  PROMPTS,
  wordTable,
} from "./full_prompt_check.ts";

async function tokenizer(): Promise<ClipTokenizer> {
  const dir = await Deno.makeTempDir({ prefix: "bench_prompt_check_" });
  try {
    await writeClipTokenizerFiles(dir);
    return await ClipTokenizer.load(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("wordTable: word by word, the ids the whole plain prompt reads to (what diffusers' side is given)", async () => {
  const t = await tokenizer();
  const words = wordTable(t, Object.values(PROMPTS));
  assert.equal(words[EMBEDDING_WORD], undefined);
  const joined = PROMPTS.plain.split(" ").flatMap((w) => words[w]);
  assert.deepEqual(
    joined,
    readPrompt(PROMPTS.plain, t).chunks[0].tokens.slice(1, 1 + joined.length),
  );
  assert.ok(PROMPTS.embedding.split(" ").every((w) => w === EMBEDDING_WORD || words[w]?.length));
});

Deno.test("embeddingVectors: 3 × 768 values in ±0.04, the same for a seed, others for another", () => {
  const a = embeddingVectors(42);
  assert.equal(a.length, EMBEDDING_VECTORS * 768);
  assert.ok(a.every((x) => Math.abs(x) <= 0.04));
  assert.ok(a.some((x) => Math.abs(x) > 0.03));
  assert.deepEqual(embeddingVectors(42), a);
  assert.notDeepEqual(embeddingVectors(43), a);
});
