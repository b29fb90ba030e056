import { deepStrictEqual, strictEqual } from "node:assert";
import { createHash } from "node:crypto";
import { bytesToUnicode } from "./bytes_to_unicode.ts";
import { readClipBpeFile, writeClipTokenizerFiles } from "./clip_vocab.ts";

/** Git blob id: sha1("blob <size>\0" + content), as `git hash-object` computes it. */
function gitBlobId(bytes: Uint8Array): string {
  return createHash("sha1").update(`blob ${bytes.length}\0`).update(bytes).digest("hex");
}

Deno.test("bytesToUnicode: GPT-2 table facts", () => {
  const table = bytesToUnicode();
  strictEqual(table.length, 256);
  strictEqual(new Set(table.map((p) => p.byte)).size, 256);
  strictEqual(new Set(table.map((p) => p.char)).size, 256);
  const byByte = new Map(table.map((p) => [p.byte, p.char]));
  // Printable bytes map to themselves; space (0x20) is the famous "Ġ" (U+0120)
  // and byte 0 is "Ā" (U+0100), the first shifted code point.
  strictEqual(byByte.get(0x41), "A");
  strictEqual(byByte.get(0x20), "\u0120");
  strictEqual(byByte.get(0x00), "\u0100");
  strictEqual(byByte.get(0xad), "\u0143"); // soft hyphen: the 68th (last) shifted byte → 256+67
  // Order of the Python dict: "!" first, then the printable ranges.
  deepStrictEqual(table.slice(0, 3).map((p) => p.char), ["!", '"', "#"]);
});

Deno.test("readClipBpeFile: CLIP vocabulary shape and special ids", async () => {
  const { vocab, merges } = await readClipBpeFile();
  strictEqual(vocab.size, 49408);
  strictEqual(merges.length, 48894);
  strictEqual(vocab.get("<|startoftext|>"), 49406);
  strictEqual(vocab.get("<|endoftext|>"), 49407);
  strictEqual(vocab.get("!"), 0);
  strictEqual(vocab.get("!</w>"), 256);
  // First merge line of bpe_simple_vocab_16e6.txt is "i n" → id 512.
  strictEqual(merges[0], "i n");
  strictEqual(vocab.get("in"), 512);
  // Published ids (dakenf/diffusers.js src/tests/tokenizers/clip.test.ts).
  strictEqual(vocab.get("astronaut</w>"), 18376);
  strictEqual(vocab.get("horse</w>"), 4558);
});

Deno.test("writeClipTokenizerFiles: byte-identical to the Hub's SD 1.5 tokenizer files", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await writeClipTokenizerFiles(`${dir}/tokenizer`);
    const vocab = await Deno.readFile(`${dir}/tokenizer/vocab.json`);
    const merges = await Deno.readFile(`${dir}/tokenizer/merges.txt`);
    // Sizes and Git blob ids of stable-diffusion-v1-5 tokenizer/{vocab.json,
    // merges.txt} as listed in Hugging Face cache scans / pinned file lists
    // (vocab.json 1,059,962 B blob 469be27c…; merges.txt 524,619 B blob 76e821f1…).
    strictEqual(vocab.length, 1059962);
    strictEqual(merges.length, 524619);
    strictEqual(gitBlobId(vocab), "469be27c5c010538f845f518c4f5e8574c78f7c8");
    strictEqual(gitBlobId(merges), "76e821f1b6f0a9709293c3b6b51ed90980b3166b");
    // sha256 values that projects pin for openai/clip-vit-large-patch14 and
    // SD 1.5 tokenizer files.
    strictEqual(
      createHash("sha256").update(vocab).digest("hex"),
      "e089ad92ba36837a0d31433e555c8f45fe601ab5c221d4f607ded32d9f7a4349",
    );
    strictEqual(
      createHash("sha256").update(merges).digest("hex"),
      "9fd691f7c8039210e0fced15865466c65820d09b63988b0174bfe25de299051a",
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
