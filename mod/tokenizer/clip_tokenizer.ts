/**
 * The CLIP tokenizer as Stable Diffusion 1.x uses it: lowercase, whitespace
 * cleaned, BPE over bytes, `<|startoftext|>` … `<|endoftext|>`, truncated to
 * 77 ids and padded with `<|endoftext|>`.
 *
 * Tokenization runs on `@huggingface/tokenizers` (the fast, tokenizer.json
 * pipeline). SD 1.5 ships only `vocab.json` + `merges.txt`, so those are
 * turned into the equivalent tokenizer.json first (see
 * `clip_tokenizer_json.ts`). Truncation and padding are done here: the
 * library exposes neither, and diffusers' rule is simple — keep the first
 * 75 tokens, wrap in BOS/EOS, pad to 77 (diffusers
 * `pipeline_onnx_stable_diffusion.py` `_encode_prompt`:
 * `padding="max_length", max_length=77, truncation=True`).
 *
 * @module
 */

import { Tokenizer } from "@huggingface/tokenizers";
import { buildClipTokenizerJson, parseMergesTxt } from "./clip_tokenizer_json.ts";
import { CLIP_BOS_TOKEN, CLIP_EOS_TOKEN } from "./clip_vocab.ts";

/** CLIP's context length: BOS + 75 tokens + EOS. */
export const CLIP_MAX_LENGTH = 77;

/** The result of {@link ClipTokenizer.encode}. */
export interface ClipEncoding {
  /** `CLIP_MAX_LENGTH` ids: BOS, up to 75 tokens, EOS, then padding. */
  ids: Int32Array;
  /** True when the prompt had more than 75 tokens and the rest was dropped. */
  truncated: boolean;
  /** Number of tokens before truncation, without BOS/EOS. */
  tokenCount: number;
}

/** Reads a file, or returns undefined when it does not exist. */
async function readOptional(path: string): Promise<string | undefined> {
  try {
    return await Deno.readTextFile(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw e;
  }
}

/** Parses JSON with an error naming the file. */
function parseJson(text: string, path: string): unknown {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new Error(`${path} is not valid JSON: ${(e as Error).message}`);
  }
}

/** Returns `value` as a plain object or throws naming the file. */
function asObject(value: unknown, path: string): Record<string, unknown> {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new Error(`${path} must hold a JSON object`);
  }
  return value as Record<string, unknown>;
}

/** A CLIP tokenizer loaded from a diffusers `tokenizer/` folder. */
export class ClipTokenizer {
  /** Id of `<|startoftext|>` (49406 for SD 1.5). */
  readonly bosId: number;
  /** Id of `<|endoftext|>` (49407 for SD 1.5). */
  readonly eosId: number;
  /** Id used for padding: the config's `pad_token`, else EOS (SD 1.x pads with EOS). */
  readonly padId: number;
  /** Output length, 77. */
  readonly maxLength: number = CLIP_MAX_LENGTH;
  /**
   * Ids in the vocabulary, special tokens included (49408 for SD 1.5): the first id past it is
   * free for rows a text encoder's token table adds (textual-inversion embeddings).
   */
  readonly vocabSize: number;
  readonly #tokenizer: Tokenizer;

  private constructor(tokenizer: Tokenizer, bosId: number, eosId: number, padId: number) {
    this.#tokenizer = tokenizer;
    this.bosId = bosId;
    this.eosId = eosId;
    this.padId = padId;
    let last = -1;
    for (const id of tokenizer.get_vocab(true).values()) last = Math.max(last, id);
    this.vocabSize = last + 1;
  }

  /**
   * Loads `dir/tokenizer.json` when present, else `dir/vocab.json` +
   * `dir/merges.txt`. `dir/tokenizer_config.json` is optional; its
   * `pad_token` (a string or `{content}`) picks the padding id.
   */
  static async load(dir: string): Promise<ClipTokenizer> {
    const configPath = `${dir}/tokenizer_config.json`;
    const configText = await readOptional(configPath);
    const config = configText === undefined
      ? {}
      : asObject(parseJson(configText, configPath), configPath);

    const jsonPath = `${dir}/tokenizer.json`;
    const jsonText = await readOptional(jsonPath);
    let tokenizerJson: Record<string, unknown>;
    if (jsonText !== undefined) {
      tokenizerJson = asObject(parseJson(jsonText, jsonPath), jsonPath);
    } else {
      const vocabPath = `${dir}/vocab.json`;
      const mergesPath = `${dir}/merges.txt`;
      const vocabText = await readOptional(vocabPath);
      const mergesText = await readOptional(mergesPath);
      if (vocabText === undefined || mergesText === undefined) {
        throw new Error(
          `CLIP tokenizer not found in ${dir}: need tokenizer.json, or vocab.json and merges.txt`,
        );
      }
      const vocab = asObject(parseJson(vocabText, vocabPath), vocabPath) as Record<string, number>;
      tokenizerJson = buildClipTokenizerJson(
        vocab,
        parseMergesTxt(mergesText),
      ) as unknown as Record<
        string,
        unknown
      >;
    }
    let tokenizer: Tokenizer;
    try {
      tokenizer = new Tokenizer(tokenizerJson, config);
    } catch (e) {
      throw new Error(`cannot build the CLIP tokenizer from ${dir}: ${(e as Error).message}`);
    }
    const idOf = (token: string, what: string): number => {
      const id = tokenizer.token_to_id(token);
      if (id === undefined) {
        throw new Error(`CLIP tokenizer in ${dir} has no ${what} token ${JSON.stringify(token)}`);
      }
      return id;
    };
    const bos = idOf(CLIP_BOS_TOKEN, "BOS");
    const eos = idOf(CLIP_EOS_TOKEN, "EOS");
    // pad_token is a string, or an AddedToken dict {"content": …} in older configs.
    const pad = config.pad_token as string | { content?: unknown } | null | undefined;
    const padToken = typeof pad === "string"
      ? pad
      : typeof pad?.content === "string"
      ? pad.content
      : CLIP_EOS_TOKEN;
    return new ClipTokenizer(tokenizer, bos, eos, idOf(padToken, "pad"));
  }

  /**
   * Token ids of `text` without BOS/EOS, not truncated (for callers that
   * chunk long prompts themselves).
   */
  tokenize(text: string): number[] {
    return this.#tokenizer.encode(text, { add_special_tokens: false }).ids;
  }

  /**
   * Encodes a prompt to exactly 77 ids: BOS, the first 75 tokens, EOS, then
   * padding. Text is NFC-normalized, whitespace runs become one space, it is
   * lowercased; leading/trailing whitespace produces no tokens.
   */
  encode(text: string): ClipEncoding {
    const tokens = this.tokenize(text);
    const room = this.maxLength - 2;
    const kept = tokens.length > room ? tokens.slice(0, room) : tokens;
    const ids = new Int32Array(this.maxLength).fill(this.padId);
    ids[0] = this.bosId;
    ids.set(kept, 1);
    ids[kept.length + 1] = this.eosId;
    return { ids, truncated: tokens.length > room, tokenCount: tokens.length };
  }

  /** The vocabulary's text of one id (BPE form: `photo</w>`), or undefined past the vocabulary. */
  tokenText(id: number): string | undefined {
    return this.#tokenizer.id_to_token(id);
  }

  /** Decodes ids back to text (special tokens skipped), for logs and messages. */
  decode(ids: ArrayLike<number>): string {
    const list = Array.from(ids);
    if (list.length === 0) return "";
    return this.#tokenizer.decode(list, { skip_special_tokens: true }).trim();
  }
}
