import { deepStrictEqual, ok, rejects, strictEqual } from "node:assert";
import { ClipTokenizer } from "./clip_tokenizer.ts";
import { readClipBpeFile, writeClipTokenizerFiles } from "./clip_vocab.ts";

const BOS = 49406;
const EOS = 49407;

/** The real SD 1.5 tokenizer files, written once into a temp dir. */
const tokenizerDir: Promise<string> = (async () => {
  const dir = await Deno.makeTempDir({ prefix: "clip_tok_" });
  await writeClipTokenizerFiles(dir);
  return dir;
})();

let cached: ClipTokenizer | undefined;
async function realTokenizer(): Promise<ClipTokenizer> {
  cached ??= await ClipTokenizer.load(await tokenizerDir);
  return cached;
}

/** BOS + ids + EOS, padded with EOS to 77. */
function padded(ids: number[]): number[] {
  const out = [BOS, ...ids, EOS];
  while (out.length < 77) out.push(EOS);
  return out;
}

/**
 * Published id sequences (content tokens only, no BOS/EOS):
 * - dakenf/diffusers.js src/tests/tokenizers/clip.test.ts
 * - elixir-nx/bumblebee test/bumblebee/text/clip_tokenizer_test.exs (openai/clip-vit-base-patch32)
 * - instant-labs/instant-clip-tokenizer instant-clip-tokenizer/src/lib.rs tests
 *   (a port checked against OpenAI's simple_tokenizer.py)
 */
const PUBLISHED: [string, number[]][] = [
  ["An astronaut riding a horse", [550, 18376, 6765, 320, 4558]],
  ["a photo of a cat", [320, 1125, 539, 320, 2368]],
  ["a photo of a dog", [320, 1125, 539, 320, 1929]],
  ["Hi there", [1883, 997]],
  ["How are you?", [829, 631, 592, 286]],
  ["hello world!!!", [3306, 1002, 995]],
  ["i've seen it", [328, 1200, 2041, 585]],
  ["Hello Båstad", [3306, 65, 23176, 16485]],
  ["A person riding a motorcycle", [320, 2533, 6765, 320, 10297]],
  [
    "donaudampfschifffahrtsgesellschaftskapitänsmütze",
    [
      1067,
      627,
      1880,
      16680,
      13731,
      1021,
      778,
      4810,
      2290,
      619,
      10279,
      45588,
      83,
      909,
      688,
      529,
      42787,
      978,
      6522,
      83,
      1298,
    ],
  ],
];

Deno.test("ClipTokenizer: published CLIP id sequences", async () => {
  const tok = await realTokenizer();
  for (const [text, ids] of PUBLISHED) {
    const enc = tok.encode(text);
    deepStrictEqual(Array.from(enc.ids), padded(ids), text);
    strictEqual(enc.tokenCount, ids.length, text);
    strictEqual(enc.truncated, false, text);
  }
});

Deno.test("ClipTokenizer: special ids come from the vocabulary", async () => {
  const tok = await realTokenizer();
  strictEqual(tok.bosId, BOS);
  strictEqual(tok.eosId, EOS);
  strictEqual(tok.padId, EOS);
  strictEqual(tok.maxLength, 77);
});

Deno.test("ClipTokenizer: output is a 77-long Int32Array padded with EOS", async () => {
  const tok = await realTokenizer();
  const enc = tok.encode("Hi");
  ok(enc.ids instanceof Int32Array);
  strictEqual(enc.ids.length, 77);
  deepStrictEqual(Array.from(enc.ids.subarray(0, 3)), [BOS, 1883, EOS]);
  ok(enc.ids.subarray(3).every((v) => v === EOS));
  const empty = tok.encode("");
  deepStrictEqual(Array.from(empty.ids), padded([]));
  strictEqual(empty.tokenCount, 0);
});

Deno.test("ClipTokenizer: whitespace, newlines and case do not change ids", async () => {
  const tok = await realTokenizer();
  const ref = Array.from(tok.encode("An astronaut riding a horse").ids);
  for (
    const variant of [
      "  An astronaut riding a horse  ",
      "An\nastronaut\r\n\triding   a horse",
      "AN ASTRONAUT RIDING A HORSE",
      "\u3000an astronaut\u00a0riding a horse\n",
    ]
  ) {
    deepStrictEqual(Array.from(tok.encode(variant).ids), ref, JSON.stringify(variant));
  }
  deepStrictEqual(Array.from(tok.encode(" \t\n ").ids), padded([]));
});

Deno.test("ClipTokenizer: NFC makes composed and decomposed text equal", async () => {
  // transformers tests/models/clip/test_tokenization_clip.py: "xa\u0303y" vs "x\xe3y".
  const tok = await realTokenizer();
  deepStrictEqual(tok.tokenize("xa\u0303y"), tok.tokenize("x\u00e3y"));
});

Deno.test("ClipTokenizer: truncation keeps BOS + first 75 tokens + EOS", async () => {
  const tok = await realTokenizer();
  // "a" is one token (320); 100 of them exceed the 75-token room.
  const long = Array.from({ length: 100 }, () => "a").join(" ") + " horse";
  const enc = tok.encode(long);
  strictEqual(enc.truncated, true);
  strictEqual(enc.tokenCount, 101);
  const expected = [BOS, ...Array.from({ length: 75 }, () => 320), EOS];
  deepStrictEqual(Array.from(enc.ids), expected);

  // Exactly 75 tokens fit without truncation; 76 do not.
  const fits = tok.encode(Array.from({ length: 75 }, () => "a").join(" "));
  strictEqual(fits.truncated, false);
  strictEqual(fits.tokenCount, 75);
  strictEqual(fits.ids[75], 320);
  strictEqual(fits.ids[76], EOS);
  const over = tok.encode(Array.from({ length: 75 }, () => "a").join(" ") + " horse");
  strictEqual(over.truncated, true);
  strictEqual(over.tokenCount, 76);
  strictEqual(over.ids[75], 320);
  strictEqual(over.ids[76], EOS);
});

Deno.test("ClipTokenizer: special-token text is the special token (as transformers does)", async () => {
  const tok = await realTokenizer();
  deepStrictEqual(tok.tokenize("a <|endoftext|> cat"), [320, EOS, 2368]);
});

/**
 * Writes tokenizer.json in the layout the Rust `tokenizers` crate serializes
 * for CLIPTokenizerFast (merges as [left, right] pairs, the newer format), built
 * here by hand from the same vocabulary.
 */
async function writeHandMadeTokenizerJson(dir: string): Promise<void> {
  const { vocab, merges } = await readClipBpeFile();
  const special = (id: number, content: string) => ({
    id,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  });
  const json = {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [special(BOS, "<|startoftext|>"), special(EOS, "<|endoftext|>")],
    normalizer: {
      type: "Sequence",
      normalizers: [
        { type: "NFC" },
        { type: "Replace", pattern: { Regex: "\\s+" }, content: " " },
        { type: "Lowercase" },
      ],
    },
    pre_tokenizer: {
      type: "Sequence",
      pretokenizers: [
        {
          type: "Split",
          pattern: { Regex: "'s|'t|'re|'ve|'m|'ll|'d|[\\p{L}]+|[\\p{N}]|[^\\s\\p{L}\\p{N}]+" },
          behavior: "Removed",
          invert: true,
        },
        { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true },
      ],
    },
    post_processor: {
      type: "RobertaProcessing",
      sep: ["<|endoftext|>", EOS],
      cls: ["<|startoftext|>", BOS],
      trim_offsets: false,
      add_prefix_space: false,
    },
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: "BPE",
      dropout: null,
      unk_token: "<|endoftext|>",
      continuing_subword_prefix: "",
      end_of_word_suffix: "</w>",
      fuse_unk: false,
      byte_fallback: false,
      vocab: Object.fromEntries(vocab),
      merges: merges.map((m) => m.split(" ")),
    },
  };
  await Deno.writeTextFile(`${dir}/tokenizer.json`, JSON.stringify(json));
}

Deno.test("ClipTokenizer: tokenizer.json path gives the same ids as vocab.json + merges.txt", async () => {
  const dir = await Deno.makeTempDir({ prefix: "clip_tokjson_" });
  try {
    await writeHandMadeTokenizerJson(dir);
    const fromJson = await ClipTokenizer.load(dir);
    const fromFiles = await realTokenizer();
    const texts = [
      ...PUBLISHED.map(([t]) => t),
      "A\n'll 11p223RF☆ho!!to?'d'd''d of a cat to-$''d.", // transformers slow/fast check text
      "masterpiece, best quality, (red:1.2) dress, 8k uhd, 😀 你好",
      Array.from({ length: 90 }, (_, i) => `w${i}`).join(" "),
    ];
    for (const text of texts) {
      const a = fromJson.encode(text);
      const b = fromFiles.encode(text);
      deepStrictEqual(Array.from(a.ids), Array.from(b.ids), text);
      strictEqual(a.tokenCount, b.tokenCount, text);
      strictEqual(a.truncated, b.truncated, text);
    }
    deepStrictEqual(Array.from(fromJson.encode("An astronaut riding a horse").ids.subarray(0, 7)), [
      BOS,
      550,
      18376,
      6765,
      320,
      4558,
      EOS,
    ]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("ClipTokenizer: transformers toy vocabulary (test_full_tokenizer)", async () => {
  // transformers tests/models/clip/test_tokenization_clip.py setUp/test_full_tokenizer:
  // "lower newer" → ["lo", "w", "er</w>", "n", "e", "w", "er</w>"] → [10, 2, 16, 9, 3, 2, 16].
  const vocabList = [
    "l",
    "o",
    "w",
    "e",
    "r",
    "s",
    "t",
    "i",
    "d",
    "n",
    "lo",
    "l</w>",
    "w</w>",
    "r</w>",
    "t</w>",
    "low</w>",
    "er</w>",
    "lowest</w>",
    "newer</w>",
    "wider",
    "<unk>",
    "<|startoftext|>",
    "<|endoftext|>",
  ];
  const dir = await Deno.makeTempDir({ prefix: "clip_toy_" });
  try {
    await Deno.writeTextFile(
      `${dir}/vocab.json`,
      JSON.stringify(Object.fromEntries(vocabList.map((t, i) => [t, i]))) + "\n",
    );
    // No trailing newline, exactly as the transformers test writes it.
    await Deno.writeTextFile(
      `${dir}/merges.txt`,
      ["#version: 0.2", "l o", "lo w</w>", "e r</w>"].join("\n"),
    );
    const tok = await ClipTokenizer.load(dir);
    deepStrictEqual(tok.tokenize("lower newer"), [10, 2, 16, 9, 3, 2, 16]);
    strictEqual(tok.bosId, 21);
    strictEqual(tok.eosId, 22);
    const enc = tok.encode("lower newer");
    deepStrictEqual(Array.from(enc.ids.subarray(0, 10)), [21, 10, 2, 16, 9, 3, 2, 16, 22, 22]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("ClipTokenizer: pad_token from tokenizer_config.json picks the padding id", async () => {
  const dir = await Deno.makeTempDir({ prefix: "clip_pad_" });
  try {
    await writeClipTokenizerFiles(dir);
    // SD 2.x configs pad with "!" (id 0) instead of <|endoftext|>.
    await Deno.writeTextFile(`${dir}/tokenizer_config.json`, JSON.stringify({ pad_token: "!" }));
    const tok = await ClipTokenizer.load(dir);
    strictEqual(tok.padId, 0);
    deepStrictEqual(Array.from(tok.encode("Hi").ids.subarray(0, 5)), [BOS, 1883, EOS, 0, 0]);
    // Older configs store special tokens as AddedToken dicts.
    await Deno.writeTextFile(
      `${dir}/tokenizer_config.json`,
      JSON.stringify({ pad_token: { __type: "AddedToken", content: "<|endoftext|>" } }),
    );
    strictEqual((await ClipTokenizer.load(dir)).padId, EOS);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("ClipTokenizer.load: clear errors for missing or broken files", async () => {
  const dir = await Deno.makeTempDir({ prefix: "clip_err_" });
  try {
    await rejects(ClipTokenizer.load(dir), /need tokenizer\.json, or vocab\.json and merges\.txt/);
    await Deno.writeTextFile(`${dir}/vocab.json`, "{not json");
    await Deno.writeTextFile(`${dir}/merges.txt`, "#version: 0.2\na b\n");
    await rejects(ClipTokenizer.load(dir), /vocab\.json is not valid JSON/);
    await Deno.writeTextFile(`${dir}/vocab.json`, JSON.stringify({ a: 0, b: 1, ab: 2 }));
    await rejects(ClipTokenizer.load(dir), /no id for the special token "<\|startoftext\|>"/);
    await Deno.writeTextFile(
      `${dir}/vocab.json`,
      JSON.stringify({ "<|startoftext|>": 0, "<|endoftext|>": 1 }),
    );
    await Deno.writeTextFile(`${dir}/merges.txt`, "#version: 0.2\nab\n");
    await rejects(ClipTokenizer.load(dir), /merges\.txt line 2 is not "left right": "ab"/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("ClipTokenizer: clean up the shared temp dir", async () => {
  const dir = await tokenizerDir;
  await Deno.remove(dir, { recursive: true });
  await rejects(Deno.stat(dir), Deno.errors.NotFound);
});

Deno.test("ClipTokenizer: vocabulary size and the text of one id", async () => {
  const tok = await realTokenizer();
  strictEqual(tok.vocabSize, 49408);
  strictEqual(tok.tokenText(1125), "photo</w>");
  strictEqual(tok.tokenText(267), ",</w>");
  strictEqual(tok.tokenText(EOS), "<|endoftext|>");
  strictEqual(tok.tokenText(49408), undefined);
});
