/**
 * Builds the `tokenizer.json` equivalent of a CLIP `vocab.json` + `merges.txt`
 * pair, so that the slow-tokenizer files SD 1.5 ships can run through the
 * `@huggingface/tokenizers` fast pipeline.
 *
 * Source: transformers `src/transformers/convert_slow_tokenizer.py`
 * `CLIPConverter.converted()`:
 * - model `BPE(continuing_subword_prefix="", end_of_word_suffix="</w>",
 *   fuse_unk=False, unk_token=<|endoftext|>)`;
 * - normalizer `Sequence[NFC, Replace(Regex(\s+) → " "), Lowercase]`;
 * - pre-tokenizer `Sequence[Split(Regex(CLIP pattern), "removed", invert=True),
 *   ByteLevel(add_prefix_space=False)]`;
 * - decoder `ByteLevel`; post-processor `RobertaProcessing(sep=EOS, cls=BOS,
 *   add_prefix_space=False, trim_offsets=False)`.
 *
 * @module
 */

import { CLIP_BOS_TOKEN, CLIP_EOS_TOKEN, CLIP_MERGE_COUNT } from "./clip_vocab.ts";

/**
 * The CLIP word-split pattern (transformers `tokenization_clip.py` without the
 * special-token alternatives, which the fast tokenizer handles as added tokens).
 */
export const CLIP_SPLIT_PATTERN: string = String
  .raw`'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+`;

/** The subset of the `tokenizer.json` shape this module produces. */
export interface ClipTokenizerJson {
  /** Format version written by the Rust `tokenizers` crate. */
  version: string;
  /** BOS/EOS as special added tokens. */
  added_tokens: {
    id: number;
    content: string;
    single_word: boolean;
    lstrip: boolean;
    rstrip: boolean;
    normalized: boolean;
    special: boolean;
  }[];
  /** NFC → whitespace runs to one space → lowercase. */
  normalizer: unknown;
  /** CLIP regex split, then byte-level mapping. */
  pre_tokenizer: unknown;
  /** `<|startoftext|> … <|endoftext|>` around the sequence. */
  post_processor: unknown;
  /** Byte-level decoder. */
  decoder: unknown;
  /** The BPE model: vocabulary and merges. */
  model: {
    type: "BPE";
    dropout: null;
    unk_token: string;
    continuing_subword_prefix: string;
    end_of_word_suffix: string;
    fuse_unk: boolean;
    byte_fallback: boolean;
    vocab: Record<string, number>;
    merges: string[];
  };
}

/**
 * Parses HF `merges.txt` the way transformers `CLIPTokenizer.__init__` does:
 * `read().strip().split("\n")[1 : 49152 - 256 - 2 + 1]` (first line is the
 * `#version` header; at most 48,894 merges are used).
 */
export function parseMergesTxt(text: string): string[] {
  const lines = text.trim().split("\n").slice(1, CLIP_MERGE_COUNT + 1);
  return lines.map((line, i) => {
    const parts = line.trim().split(/\s+/);
    if (parts.length !== 2) {
      throw new Error(`merges.txt line ${i + 2} is not "left right": ${JSON.stringify(line)}`);
    }
    return parts.join(" ");
  });
}

/** Looks up a required token id, with an error naming the token. */
function requireId(vocab: Record<string, number>, token: string): number {
  const id = vocab[token];
  if (typeof id !== "number" || !Number.isInteger(id)) {
    throw new Error(`vocab.json has no id for the special token ${JSON.stringify(token)}`);
  }
  return id;
}

/**
 * Builds the `tokenizer.json` object for a CLIP vocabulary (`vocab.json`
 * contents) and merge list (see {@link parseMergesTxt}). BOS/EOS ids are read
 * from the vocabulary's `<|startoftext|>` / `<|endoftext|>` entries.
 */
export function buildClipTokenizerJson(
  vocab: Record<string, number>,
  merges: string[],
): ClipTokenizerJson {
  const bos = requireId(vocab, CLIP_BOS_TOKEN);
  const eos = requireId(vocab, CLIP_EOS_TOKEN);
  const added = (id: number, content: string) => ({
    id,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: true,
    special: true,
  });
  return {
    version: "1.0",
    added_tokens: [added(bos, CLIP_BOS_TOKEN), added(eos, CLIP_EOS_TOKEN)],
    normalizer: {
      type: "Sequence",
      normalizers: [
        { type: "NFC" },
        { type: "Replace", pattern: { Regex: String.raw`\s+` }, content: " " },
        { type: "Lowercase" },
      ],
    },
    pre_tokenizer: {
      type: "Sequence",
      pretokenizers: [
        {
          type: "Split",
          pattern: { Regex: CLIP_SPLIT_PATTERN },
          behavior: "Removed",
          invert: true,
        },
        { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true },
      ],
    },
    post_processor: {
      type: "RobertaProcessing",
      sep: [CLIP_EOS_TOKEN, eos],
      cls: [CLIP_BOS_TOKEN, bos],
      trim_offsets: false,
      add_prefix_space: false,
    },
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: "BPE",
      dropout: null,
      unk_token: CLIP_EOS_TOKEN,
      continuing_subword_prefix: "",
      end_of_word_suffix: "</w>",
      fuse_unk: false,
      byte_fallback: false,
      vocab,
      merges,
    },
  };
}
