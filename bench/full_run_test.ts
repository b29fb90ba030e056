import assert from "node:assert/strict";
import { readPrompt } from "../mod/prompt/mod.ts";
import { ClipTokenizer, writeClipTokenizerFiles } from "../mod/tokenizer/mod.ts";
import { chunkedPrompt } from "./full_run.ts";

async function tokenizer(): Promise<ClipTokenizer> {
  const dir = await Deno.makeTempDir({ prefix: "bench_chunks_" });
  try {
    await writeClipTokenizerFiles(dir);
    return await ClipTokenizer.load(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("chunkedPrompt(k) is read by AUTOMATIC1111's rules into exactly k chunks, every passage whole", async () => {
  const t = await tokenizer();
  for (const k of [1, 2, 3, 4]) {
    const read = readPrompt(chunkedPrompt(k), t);
    assert.equal(read.chunks.length, k, `k = ${k}`);
    // Each chunk holds one passage: its first token is the passage's first word, never a moved tail.
    const firsts = chunkedPrompt(k).split(" BREAK ").map((p) => t.tokenize(p)[0]);
    assert.deepEqual(read.chunks.map((c) => c.tokens[1]), firsts);
  }
  assert.throws(() => chunkedPrompt(5), /--chunks: 1 to 4, got 5/);
});
