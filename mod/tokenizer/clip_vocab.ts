/**
 * Builds the Hugging Face `vocab.json` + `merges.txt` pair of the CLIP
 * tokenizer from OpenAI's `bpe_simple_vocab_16e6.txt.gz`.
 *
 * Source: openai/CLIP `clip/simple_tokenizer.py` `SimpleTokenizer.__init__`:
 *
 * ```py
 * merges = gzip.open(bpe_path).read().decode("utf-8").split('\n')
 * merges = merges[1:49152-256-2+1]
 * vocab = list(bytes_to_unicode().values())
 * vocab = vocab + [v+'</w>' for v in vocab]
 * for merge in merges: vocab.append(''.join(merge))
 * vocab.extend(['<|startoftext|>', '<|endoftext|>'])
 * ```
 *
 * The `merges.txt` format (a `#version: 0.2` header, one merge per line, each
 * line ending in "\n") follows transformers `CLIPTokenizer.save_vocabulary`.
 *
 * @module
 */

import { bytesToUnicode } from "./bytes_to_unicode.ts";

/** Number of merges CLIP uses: 49152 − 256 − 2 (simple_tokenizer.py). */
export const CLIP_MERGE_COUNT = 49152 - 256 - 2;

/** CLIP's beginning-of-text token. */
export const CLIP_BOS_TOKEN = "<|startoftext|>";
/** CLIP's end-of-text token (also the padding token for SD 1.x). */
export const CLIP_EOS_TOKEN = "<|endoftext|>";

/** A CLIP vocabulary built from the OpenAI BPE file. */
export interface ClipVocab {
  /** Token → id, in id order (49408 entries for the real file). */
  vocab: Map<string, number>;
  /** Merges as "left right" strings, in priority order. */
  merges: string[];
}

/** Path of the OpenAI BPE file shipped in this repository's fixtures. */
export const CLIP_BPE_FIXTURE: URL = new URL(
  "../../tests/fixtures/clip/bpe_simple_vocab_16e6.txt.gz",
  import.meta.url,
);

/** Gunzips `bytes` with the web-standard DecompressionStream. */
async function gunzip(bytes: Uint8Array): Promise<Uint8Array> {
  const stream = new Blob([bytes as BlobPart]).stream().pipeThrough(
    new DecompressionStream("gzip"),
  );
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/**
 * Builds the CLIP vocabulary and merge list from the text of
 * `bpe_simple_vocab_16e6.txt` (already decompressed).
 */
export function buildClipVocab(bpeText: string): ClipVocab {
  const lines = bpeText.split("\n");
  const mergeLines = lines.slice(1, CLIP_MERGE_COUNT + 1);
  if (mergeLines.length !== CLIP_MERGE_COUNT) {
    throw new Error(
      `CLIP BPE file has ${mergeLines.length} merge lines after the header, expected ${CLIP_MERGE_COUNT}`,
    );
  }
  const tokens: string[] = [];
  const table = bytesToUnicode();
  for (const { char } of table) tokens.push(char);
  for (const { char } of table) tokens.push(char + "</w>");
  const merges: string[] = [];
  for (const [i, line] of mergeLines.entries()) {
    // Python's str.split() with no argument: split on runs of whitespace.
    const parts = line.trim().split(/\s+/);
    if (parts.length !== 2) {
      throw new Error(`CLIP BPE file line ${i + 2} is not "a b": ${JSON.stringify(line)}`);
    }
    merges.push(parts.join(" "));
    tokens.push(parts[0] + parts[1]);
  }
  tokens.push(CLIP_BOS_TOKEN, CLIP_EOS_TOKEN);
  // dict(zip(vocab, range(len(vocab)))): a later duplicate would overwrite an
  // earlier id; keep that behaviour so ids match the Python dict exactly.
  const vocab = new Map<string, number>();
  tokens.forEach((t, i) => vocab.set(t, i));
  return { vocab, merges };
}

/** Reads and decompresses an OpenAI `bpe_simple_vocab_16e6.txt.gz`. */
export async function readClipBpeFile(path: string | URL = CLIP_BPE_FIXTURE): Promise<ClipVocab> {
  const raw = await Deno.readFile(path);
  return buildClipVocab(new TextDecoder("utf-8", { fatal: true }).decode(await gunzip(raw)));
}

/** Compares two strings by Unicode code point, as Python's `sorted()` does. */
function compareCodePoints(a: string, b: string): number {
  const x = Array.from(a, (c) => c.codePointAt(0)!);
  const y = Array.from(b, (c) => c.codePointAt(0)!);
  const n = Math.min(x.length, y.length);
  for (let i = 0; i < n; i++) if (x[i] !== y[i]) return x[i] - y[i];
  return x.length - y.length;
}

/**
 * Serializes the vocabulary byte-for-byte as the Hub's CLIP `vocab.json`:
 * transformers `CLIPTokenizer.save_vocabulary` writes
 * `json.dumps(encoder, indent=2, sort_keys=True, ensure_ascii=False) + "\n"`.
 * (The result has the Git blob id of stable-diffusion-v1-5 `tokenizer/vocab.json`,
 * 469be27c…, 1,059,962 bytes.)
 */
export function vocabJsonText(vocab: Map<string, number>): string {
  const keys = [...vocab.keys()].sort(compareCodePoints);
  // JSON.stringify escapes the same characters as Python's json with
  // ensure_ascii=False (quote, backslash, C0 controls).
  const lines = keys.map((k) => `  ${JSON.stringify(k)}: ${vocab.get(k)}`);
  return "{\n" + lines.join(",\n") + "\n}\n";
}

/** Serializes the merges as HF `merges.txt`: header line, then one merge per line. */
export function mergesText(merges: string[]): string {
  return "#version: 0.2\n" + merges.map((m) => m + "\n").join("");
}

/**
 * Writes `dir/vocab.json` and `dir/merges.txt` (creating `dir`) built from the
 * OpenAI BPE file (default: the copy in `tests/fixtures/clip/`). Used to give
 * the test-sized model set the real SD 1.5 tokenizer.
 */
export async function writeClipTokenizerFiles(
  dir: string,
  bpePath: string | URL = CLIP_BPE_FIXTURE,
): Promise<void> {
  const { vocab, merges } = await readClipBpeFile(bpePath);
  await Deno.mkdir(dir, { recursive: true });
  await Deno.writeTextFile(`${dir}/vocab.json`, vocabJsonText(vocab));
  await Deno.writeTextFile(`${dir}/merges.txt`, mergesText(merges));
}
