/**
 * The chunker held against AUTOMATIC1111's `tokenize_line` (AUTOMATIC1111/stable-diffusion-webui
 * `modules/sd_hijack_clip.py` at commit 00e09382cd85c77ac35545c7264855823dfc2eb1), on the real
 * SD 1.5 CLIP vocabulary. Each expected chunk is built by hand from that function's rules; the
 * single-token ids (a 320, photo 1125, of 539, cat 2368, dog 1929, `,` 267) are the vocabulary's.
 */
import { deepStrictEqual, ok, strictEqual, throws } from "node:assert";
import { ClipTokenizer, writeClipTokenizerFiles } from "../tokenizer/mod.ts";
import {
  PROMPT_CHUNK_SIZE,
  type PromptChunk,
  type PromptEmbedding,
  PromptEmbeddingIndex,
  readPrompt,
} from "./read.ts";

const BOS = 49406;
const EOS = 49407;
const A = 320;
const PHOTO = 1125;
const OF = 539;
const CAT = 2368;
const DOG = 1929;
const COMMA = 267;
/** "easynegative" tokenizes to these two ids. */
const EASY_NEGATIVE_IDS = [18308, 8869];

let cached: ClipTokenizer | undefined;
async function tokenizer(): Promise<ClipTokenizer> {
  if (cached === undefined) {
    const dir = await Deno.makeTempDir({ prefix: "prompt_read_" });
    try {
      await writeClipTokenizerFiles(dir);
      cached = await ClipTokenizer.load(dir);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }
  return cached;
}

/** One expected chunk: BOS, the tokens, EOS padding to 77; weights 1 outside the tokens. */
function chunk(
  tokens: number[],
  multipliers: number[] = tokens.map(() => 1),
  embeddings: { offset: number; name: string }[] = [],
): PromptChunk {
  const pad = 75 - tokens.length;
  return {
    tokens: [BOS, ...tokens, ...Array(pad).fill(EOS), EOS],
    multipliers: [1, ...multipliers, ...Array(pad).fill(1), 1],
    embeddings,
  };
}

const repeat = <T>(value: T, n: number): T[] => Array(n).fill(value);
const words = (word: string, n: number): string => repeat(word, n).join(" ");

Deno.test("readPrompt: a short prompt is one chunk, as the plain tokenizer encodes it", async () => {
  const tok = await tokenizer();
  const read = readPrompt("a photo of a cat", tok);
  deepStrictEqual(read.chunks, [chunk([A, PHOTO, OF, A, CAT])]);
  strictEqual(read.tokenCount, 5);
  deepStrictEqual(read.embeddingsUsed, []);
  // Without brackets and within 75 tokens, the ids are the plain (diffusers) encoding's.
  for (const text of ["a photo of a cat", "An astronaut riding a horse, 4k", words("dog", 75)]) {
    deepStrictEqual(readPrompt(text, tok).chunks[0].tokens, Array.from(tok.encode(text).ids), text);
  }
});

Deno.test("readPrompt: an empty prompt is one chunk of BOS and EOS", async () => {
  const tok = await tokenizer();
  for (const text of ["", "   ", "()"]) {
    const read = readPrompt(text, tok);
    deepStrictEqual(read.chunks, [chunk([])], JSON.stringify(text));
    strictEqual(read.tokenCount, 0);
    strictEqual(read.chunks[0].tokens.length, PROMPT_CHUNK_SIZE);
  }
});

Deno.test("readPrompt: each run's tokens carry its weight", async () => {
  const tok = await tokenizer();
  const read = readPrompt("a (photo) of [a] (cat:1.5), ((dog))", tok);
  deepStrictEqual(read.chunks, [
    chunk(
      [A, PHOTO, OF, A, CAT, COMMA, DOG],
      [1, 1.1, 1, 1 / 1.1, 1.5, 1, 1.1 * 1.1],
    ),
  ]);
  strictEqual(read.tokenCount, 7);
  // Brackets are not tokens: each run is tokenized on its own.
  strictEqual(readPrompt("(((cat)))", tok).chunks[0].tokens[1], CAT);
});

Deno.test("readPrompt: long prompts fill chunks of 75 and are never cut", async () => {
  const tok = await tokenizer();
  const exactly = readPrompt(words("cat", 75), tok);
  deepStrictEqual(exactly.chunks, [chunk(repeat(CAT, 75))]);
  strictEqual(exactly.tokenCount, 75);

  const one = readPrompt(words("cat", 76), tok);
  deepStrictEqual(one.chunks, [chunk(repeat(CAT, 75)), chunk([CAT])]);
  strictEqual(one.tokenCount, 76);

  // 160 tokens: 75 + 75 + 10, the weights following the words across chunks.
  const text = `${words("cat", 100)} (${words("dog", 60)}:1.3)`;
  const long = readPrompt(text, tok);
  deepStrictEqual(long.chunks, [
    chunk(repeat(CAT, 75)),
    chunk([...repeat(CAT, 25), ...repeat(DOG, 50)], [...repeat(1, 25), ...repeat(1.3, 50)]),
    chunk(repeat(DOG, 10), repeat(1.3, 10)),
  ]);
  strictEqual(long.tokenCount, 160);
});

Deno.test("readPrompt: BREAK ends a chunk and counts it as 75", async () => {
  const tok = await tokenizer();
  const read = readPrompt("a cat BREAK a dog", tok);
  deepStrictEqual(read.chunks, [chunk([A, CAT]), chunk([A, DOG])]);
  strictEqual(read.tokenCount, 77);

  // A trailing BREAK leaves no empty chunk behind it; a leading one leaves an empty chunk first.
  const trailing = readPrompt("a cat BREAK", tok);
  deepStrictEqual(trailing.chunks, [chunk([A, CAT])]);
  strictEqual(trailing.tokenCount, 75);
  const leading = readPrompt("BREAK a cat", tok);
  deepStrictEqual(leading.chunks, [chunk([]), chunk([A, CAT])]);
  strictEqual(leading.tokenCount, 77);

  // Two BREAKs make an empty chunk between them.
  const twice = readPrompt("cat BREAK BREAK dog", tok);
  deepStrictEqual(twice.chunks, [chunk([CAT]), chunk([]), chunk([DOG])]);
  strictEqual(twice.tokenCount, 151);

  // Lowercase "break" is a word; inside brackets BREAK is the text "break" weighted -1.1.
  deepStrictEqual(readPrompt("a break", tok).chunks, [chunk([A, 2568])]);
  deepStrictEqual(
    readPrompt("(cat BREAK dog)", tok).chunks,
    [chunk([CAT, 2568, DOG], [1.1, -1.1, 1.1])],
  );

  // A BREAK after a full chunk: the full chunk ends at the BREAK, none is added between.
  const full = readPrompt(`${words("cat", 75)} BREAK dog`, tok);
  deepStrictEqual(full.chunks, [chunk(repeat(CAT, 75)), chunk([DOG])]);
  strictEqual(full.tokenCount, 76);
});

Deno.test("readPrompt: the comma back-off moves the words after the last comma", async () => {
  const tok = await tokenizer();
  // 70 cats, a comma (position 70), 10 dogs: the chunk fills at 75 with 4 dogs after the comma;
  // the 5th dog finds the comma 5 <= 20 tokens back, so the 4 dogs move on.
  const text = `${words("cat", 70)}, ${words("(dog)", 10)}`;
  const read = readPrompt(text, tok);
  deepStrictEqual(read.chunks, [
    chunk([...repeat(CAT, 70), COMMA]),
    chunk(repeat(DOG, 10), repeat(1.1, 10)),
  ]);
  strictEqual(read.tokenCount, 85);

  // Off: the chunk is cut at 75.
  const off = readPrompt(text, tok, undefined, { commaPaddingBacktrack: 0 });
  deepStrictEqual(off.chunks, [
    chunk([...repeat(CAT, 70), COMMA, ...repeat(DOG, 4)], [...repeat(1, 71), ...repeat(1.1, 4)]),
    chunk(repeat(DOG, 6), repeat(1.1, 6)),
  ]);
  strictEqual(off.tokenCount, 81);

  // The comma exactly 20 from the end (position 55) still backs off; 21 (position 54) does not.
  const at20 = readPrompt(`${words("cat", 55)}, ${words("dog", 25)}`, tok);
  deepStrictEqual(at20.chunks, [
    chunk([...repeat(CAT, 55), COMMA]),
    chunk(repeat(DOG, 25)),
  ]);
  strictEqual(at20.tokenCount, 100);
  const at21 = readPrompt(`${words("cat", 54)}, ${words("dog", 25)}`, tok);
  deepStrictEqual(at21.chunks, [
    chunk([...repeat(CAT, 54), COMMA, ...repeat(DOG, 20)]),
    chunk(repeat(DOG, 5)),
  ]);
  strictEqual(at21.tokenCount, 80);

  // A smaller setting: 5 tokens back is too far for 4.
  const small = readPrompt(text, tok, undefined, { commaPaddingBacktrack: 4 });
  deepStrictEqual(small.chunks, off.chunks);

  // A comma as the 76th token goes to the next chunk, and the back-off does not look back past
  // a chunk's start (its last comma is forgotten there).
  const comma76 = readPrompt(`${words("cat", 75)}, ${words("dog", 80)}`, tok);
  deepStrictEqual(comma76.chunks, [
    chunk(repeat(CAT, 75)),
    chunk([COMMA, ...repeat(DOG, 74)]),
    chunk(repeat(DOG, 6)),
  ]);
  strictEqual(comma76.tokenCount, 156);
});

/** "easynegative" with three vectors whose rows the text encoder gives ids 49408–49410. */
const EASY: PromptEmbedding = { name: "EasyNegative", rowIds: [49408, 49409, 49410] };

Deno.test("readPrompt: an embedding's word takes one position per vector with its weight", async () => {
  const tok = await tokenizer();
  const embeddings = new Map([[EASY.name, EASY]]);
  const read = readPrompt("a easynegative, (EasyNegative:1.3) cat", tok, embeddings);
  deepStrictEqual(read.chunks, [
    chunk(
      [A, ...EASY.rowIds, COMMA, ...EASY.rowIds, CAT],
      [1, 1, 1, 1, 1, 1.3, 1.3, 1.3, 1],
      [{ offset: 2, name: "EasyNegative" }, { offset: 6, name: "EasyNegative" }],
    ),
  ]);
  strictEqual(read.tokenCount, 9);
  deepStrictEqual(read.embeddingsUsed, ["EasyNegative"]);

  // Without the embedding, or split by a bracket into two runs, the word stays text.
  const plain = readPrompt("a easynegative", tok);
  deepStrictEqual(plain.chunks, [chunk([A, ...EASY_NEGATIVE_IDS])]);
  deepStrictEqual(plain.embeddingsUsed, []);
  const split = readPrompt("easy(negative)", tok, [EASY]);
  deepStrictEqual(split.embeddingsUsed, []);
  ok(!split.chunks[0].tokens.includes(EASY.rowIds[0]));
  // Part of a longer word is another token sequence, not the embedding.
  deepStrictEqual(readPrompt("easynegativev2", tok, [EASY]).embeddingsUsed, []);
});

Deno.test("readPrompt: an embedding never straddles two chunks", async () => {
  const tok = await tokenizer();
  const index = new PromptEmbeddingIndex(tok, [EASY]);
  // 72 cats + 3 vectors = 75: it fits.
  const fits = readPrompt(`${words("cat", 72)} easynegative dog`, tok, index);
  deepStrictEqual(fits.chunks, [
    chunk([...repeat(CAT, 72), ...EASY.rowIds], undefined, [{ offset: 73, name: "EasyNegative" }]),
    chunk([DOG]),
  ]);
  strictEqual(fits.tokenCount, 76);
  // 73 cats + 3 vectors = 76: the chunk ends after the cats (padded), the vectors open the next.
  const moved = readPrompt(`${words("cat", 73)} easynegative dog`, tok, index);
  deepStrictEqual(moved.chunks, [
    chunk(repeat(CAT, 73)),
    chunk([...EASY.rowIds, DOG], undefined, [{ offset: 1, name: "EasyNegative" }]),
  ]);
  strictEqual(moved.tokenCount, 79);
  // The comma back-off moves an embedding with its positions.
  const backOff = readPrompt(`${words("cat", 70)}, easynegative cat dog`, tok, index);
  deepStrictEqual(backOff.chunks, [
    chunk([...repeat(CAT, 70), COMMA]),
    chunk([...EASY.rowIds, CAT, DOG], undefined, [{ offset: 1, name: "EasyNegative" }]),
  ]);
  strictEqual(backOff.tokenCount, 80);
});

Deno.test("readPrompt: the longest embedding name is matched first", async () => {
  const tok = await tokenizer();
  const one: PromptEmbedding = { name: "cat", rowIds: [50000] };
  const two: PromptEmbedding = { name: "cat cat", rowIds: [50001, 50002] };
  const read = readPrompt("cat cat cat", tok, [one, two]);
  deepStrictEqual(read.chunks, [
    chunk([50001, 50002, 50000], undefined, [
      { offset: 1, name: "cat cat" },
      { offset: 3, name: "cat" },
    ]),
  ]);
  deepStrictEqual(read.embeddingsUsed, ["cat cat", "cat"]);
});

Deno.test("PromptEmbeddingIndex: refuses embeddings a chunk cannot hold or no word can call", async () => {
  const tok = await tokenizer();
  throws(
    () => new PromptEmbeddingIndex(tok, [{ name: "huge", rowIds: repeat(50000, 76) }]),
    /"huge" has 76 vectors; a chunk holds 1 to 75/,
  );
  throws(() => new PromptEmbeddingIndex(tok, [{ name: "none", rowIds: [] }]), /has 0 vectors/);
  throws(() => new PromptEmbeddingIndex(tok, [{ name: "  ", rowIds: [1] }]), /gives no tokens/);
  throws(
    () => new PromptEmbeddingIndex(tok, [EASY, { name: "easynegative", rowIds: [50000] }]),
    /embeddings "EasyNegative" and "easynegative" are the same word to the tokenizer/,
  );
});
