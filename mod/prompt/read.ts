/**
 * A prompt read into CLIP chunks as AUTOMATIC1111's `tokenize_line` reads it
 * (AUTOMATIC1111/stable-diffusion-webui `modules/sd_hijack_clip.py`,
 * `FrozenCLIPEmbedderWithCustomWordsBase.tokenize_line`, read at commit
 * 00e09382cd85c77ac35545c7264855823dfc2eb1), with its default emphasis ("Original": the
 * prompt goes through `parse_prompt_attention` first):
 *
 * - each `[text, weight]` run is tokenized on its own, without BOS/EOS and without truncation;
 * - tokens fill chunks of 75; a chunk is wrapped in BOS … EOS and padded to 77 with EOS
 *   (`FrozenCLIPEmbedderWithCustomWords` sets `id_pad = id_end` for SD 1.x), its multipliers
 *   1.0 on BOS, EOS and padding;
 * - `BREAK` ends the chunk at once (an empty chunk is padded as any other);
 * - the comma back-off (`comma_padding_backtrack`, 20 by default in `modules/shared_options.py`):
 *   when a chunk is full, the next token is not a comma and the chunk's last comma is at most
 *   20 tokens from its end, the tokens after that comma move to the next chunk;
 * - a textual-inversion embedding is found where the run's tokens continue with the tokens of
 *   its name (`EmbeddingDatabase.find_embedding_at_position`, the longest name first); it takes
 *   one position per vector, all with the run's weight, and never straddles two chunks: a chunk
 *   that cannot hold it ends first;
 * - an empty prompt gives one chunk (BOS and 76 EOS);
 * - the token count is 75 per chunk before the last and the last chunk's tokens.
 *
 * One choice differs from that commit, where it is a slip: when the comma back-off moves an
 * embedding's positions to the next chunk, AUTOMATIC1111 leaves the embedding's record
 * (`PromptChunkFix`) on the earlier chunk, so its vectors overwrite that chunk's padding while
 * the moved positions keep placeholder ids. Here the record moves with its positions. And two
 * embeddings whose names tokenize alike (`EasyNegative`, `easynegative`) are refused, where
 * AUTOMATIC1111 silently keeps the first.
 *
 * @module
 */

import { isBreak, parsePromptAttention } from "./attention.ts";

/** Tokens per chunk between BOS and EOS (`chunk_length`). */
export const PROMPT_CHUNK_LENGTH = 75;

/** Positions per chunk: BOS, 75 tokens, EOS. */
export const PROMPT_CHUNK_SIZE: number = PROMPT_CHUNK_LENGTH + 2;

/** AUTOMATIC1111's default `comma_padding_backtrack` (`modules/shared_options.py`). */
export const DEFAULT_COMMA_PADDING_BACKTRACK = 20;

/** What reading a prompt needs of a tokenizer; the project's `ClipTokenizer` has it. */
export interface PromptTokenizer {
  /** `<|startoftext|>`. */
  readonly bosId: number;
  /** `<|endoftext|>`, also the padding of SD 1.x chunks. */
  readonly eosId: number;
  /** Token ids without BOS/EOS, not truncated. */
  tokenize(text: string): number[];
}

/**
 * An embedding the prompt may call: `name` is the word; its vectors occupy `rowIds` (token ids
 * the text encoder's table gives it, one per vector).
 */
export interface PromptEmbedding {
  /** The word that calls it (AUTOMATIC1111: the file's stem, or a configured name). */
  name: string;
  /** One token id per vector, in order; they stand in the chunk where the vectors go. */
  rowIds: readonly number[];
  /** First 12 hex digits of the file's sha256 (AUTOMATIC1111's "TI hashes"). */
  hash?: string;
}

/** One 77-position frame of the text encoder's input. */
export interface PromptChunk {
  /** 77 ids: BOS, 75 tokens (EOS-padded), EOS. */
  tokens: number[];
  /** 77 weights, 1.0 on BOS, EOS and padding. */
  multipliers: number[];
  /** Embeddings in this chunk: `offset` is the first of its positions in the 77-frame (BOS is 0). */
  embeddings: { offset: number; name: string }[];
}

/** A prompt as the text encoder will read it. */
export interface ReadPrompt {
  /** At least one chunk. */
  chunks: PromptChunk[];
  /** As `tokenize_line` counts it: 75 per chunk before the last, then the last chunk's tokens. */
  tokenCount: number;
  /** Names of the embeddings the prompt called, in order of first use, each once. */
  embeddingsUsed: string[];
}

/** Options of {@link readPrompt}. */
export interface ReadPromptOptions {
  /** AUTOMATIC1111's `comma_padding_backtrack`; 0 turns the back-off off. Default 20. */
  commaPaddingBacktrack?: number;
}

/** Embeddings indexed by the first token of their name, longest name first. */
export class PromptEmbeddingIndex {
  readonly #byFirst = new Map<number, { ids: number[]; embedding: PromptEmbedding }[]>();
  /** The embeddings, by name. */
  readonly byName: ReadonlyMap<string, PromptEmbedding>;

  /**
   * Tokenizes each name (as `EmbeddingDatabase.register_embedding` does) once.
   *
   * @throws {Error} when a name gives no tokens, two names give the same tokens (one of them could
   *   never be called: AUTOMATIC1111 keeps the first silently), or an embedding has no vectors or
   *   more than 75.
   */
  constructor(tokenizer: PromptTokenizer, embeddings: Iterable<PromptEmbedding>) {
    const byName = new Map<string, PromptEmbedding>();
    for (const embedding of embeddings) {
      const n = embedding.rowIds.length;
      if (n < 1 || n > PROMPT_CHUNK_LENGTH) {
        throw new Error(
          `embedding "${embedding.name}" has ${n} vectors; a chunk holds 1 to ${PROMPT_CHUNK_LENGTH}`,
        );
      }
      const ids = tokenizer.tokenize(embedding.name);
      if (ids.length === 0) {
        throw new Error(`embedding name "${embedding.name}" gives no tokens; it cannot be called`);
      }
      const list = this.#byFirst.get(ids[0]) ?? [];
      const same = list.find((c) =>
        c.ids.length === ids.length && c.ids.every((id, k) => id === ids[k])
      );
      if (same !== undefined) {
        throw new Error(
          `embeddings "${same.embedding.name}" and "${embedding.name}" are the same word to the ` +
            "tokenizer (it ignores case and spacing); give one of them another name",
        );
      }
      byName.set(embedding.name, embedding);
      list.push({ ids, embedding });
      // Stable, longest first, as Python's sorted(..., reverse=True) on the length.
      list.sort((a, b) => b.ids.length - a.ids.length);
      this.#byFirst.set(ids[0], list);
    }
    this.byName = byName;
  }

  /** `find_embedding_at_position`: the embedding whose name's tokens start at `tokens[at]`. */
  findAt(
    tokens: readonly number[],
    at: number,
  ): { embedding: PromptEmbedding; length: number } | undefined {
    const candidates = this.#byFirst.get(tokens[at]);
    if (candidates === undefined) return undefined;
    for (const { ids, embedding } of candidates) {
      if (ids.every((id, k) => tokens[at + k] === id)) return { embedding, length: ids.length };
    }
    return undefined;
  }
}

/** Embeddings a prompt may call, in any of the forms {@link readPrompt} takes. */
export type PromptEmbeddings =
  | PromptEmbeddingIndex
  | ReadonlyMap<string, PromptEmbedding>
  | readonly PromptEmbedding[];

/**
 * Reads a prompt into chunks as AUTOMATIC1111's `tokenize_line` does (see the module's notes).
 * Pass a {@link PromptEmbeddingIndex} to tokenize the embeddings' names once for many prompts.
 *
 * @throws {PromptSyntaxError} when a `(text:w)` weight is not a number.
 */
export function readPrompt(
  text: string,
  tokenizer: PromptTokenizer,
  embeddings?: PromptEmbeddings,
  options: ReadPromptOptions = {},
): ReadPrompt {
  const index = embeddings === undefined
    ? undefined
    : embeddings instanceof PromptEmbeddingIndex
    ? embeddings
    : new PromptEmbeddingIndex(
      tokenizer,
      embeddings instanceof Map ? embeddings.values() : embeddings as readonly PromptEmbedding[],
    );
  const backtrack = options.commaPaddingBacktrack ?? DEFAULT_COMMA_PADDING_BACKTRACK;
  // `comma_token = vocab.get(',</w>')`: the one token a lone comma gives.
  const commaIds = tokenizer.tokenize(",");
  const comma = commaIds.length === 1 ? commaIds[0] : undefined;
  const { bosId, eosId } = tokenizer;

  const parsed = parsePromptAttention(text);
  const chunks: PromptChunk[] = [];
  const used: string[] = [];
  let tokens: number[] = [];
  let multipliers: number[] = [];
  let fixes: { offset: number; name: string }[] = []; // offsets without BOS, as in A1111
  let tokenCount = 0;
  let lastComma = -1;

  const nextChunk = (isLast = false) => {
    tokenCount += isLast ? tokens.length : PROMPT_CHUNK_LENGTH;
    const pad = PROMPT_CHUNK_LENGTH - tokens.length;
    chunks.push({
      tokens: [bosId, ...tokens, ...new Array<number>(Math.max(pad, 0)).fill(eosId), eosId],
      multipliers: [1, ...multipliers, ...new Array<number>(Math.max(pad, 0)).fill(1), 1],
      embeddings: fixes.map((f) => ({ offset: f.offset + 1, name: f.name })),
    });
    tokens = [];
    multipliers = [];
    fixes = [];
    lastComma = -1;
  };

  for (const run of parsed) {
    if (isBreak(run)) {
      nextChunk();
      continue;
    }
    const [fragment, weight] = run;
    const ids = tokenizer.tokenize(fragment);
    let position = 0;
    while (position < ids.length) {
      const token = ids[position];
      if (token === comma) {
        lastComma = tokens.length;
      } else if (
        backtrack !== 0 && tokens.length === PROMPT_CHUNK_LENGTH && lastComma !== -1 &&
        tokens.length - lastComma <= backtrack
      ) {
        const at = lastComma + 1;
        const movedTokens = tokens.slice(at);
        const movedMultipliers = multipliers.slice(at);
        const movedFixes = fixes.filter((f) => f.offset >= at).map((f) => ({
          offset: f.offset - at,
          name: f.name,
        }));
        tokens = tokens.slice(0, at);
        multipliers = multipliers.slice(0, at);
        fixes = fixes.filter((f) => f.offset < at);
        nextChunk();
        tokens = movedTokens;
        multipliers = movedMultipliers;
        fixes = movedFixes;
      }
      if (tokens.length === PROMPT_CHUNK_LENGTH) nextChunk();

      const found = index?.findAt(ids, position);
      if (found === undefined) {
        tokens.push(token);
        multipliers.push(weight);
        position++;
        continue;
      }
      const { embedding, length } = found;
      if (tokens.length + embedding.rowIds.length > PROMPT_CHUNK_LENGTH) nextChunk();
      fixes.push({ offset: tokens.length, name: embedding.name });
      if (!used.includes(embedding.name)) used.push(embedding.name);
      for (const rowId of embedding.rowIds) {
        tokens.push(rowId);
        multipliers.push(weight);
      }
      position += length;
    }
  }
  if (tokens.length > 0 || chunks.length === 0) nextChunk(true);
  return { chunks, tokenCount, embeddingsUsed: used };
}
