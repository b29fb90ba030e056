/**
 * Prompt encoding: the negative (unconditional) and positive prompts through
 * the text encoder, in one batch when classifier-free guidance is on
 * (diffusers `pipeline_onnx_stable_diffusion.py` `_encode_prompt`: uncond
 * first, `np.concatenate([negative, positive])`).
 *
 * Two ways of reading a prompt (`[prompt] syntax`):
 *
 * - "plain": the text as it is, cut at 77 tokens with a note (diffusers).
 * - "a1111": AUTOMATIC1111's reading (`mod/prompt` `readPrompt`: emphasis,
 *   `BREAK`, 75-token chunks, textual-inversion rows). As its
 *   `modules/sd_hijack_clip.py` `forward` does (AUTOMATIC1111/stable-diffusion-webui
 *   commit 5ad03e65), every 77-token chunk goes through the text encoder on
 *   its own (here all chunks of both prompts in one batch: the encoder has
 *   no interaction between batch rows), and a prompt's chunks are
 *   concatenated along the sequence (`torch.hstack(zs)`): 77·k positions.
 *   Each chunk then gets the "Original" emphasis ({@link applyEmphasis}).
 *   Prompts of different chunk counts keep their own lengths (AUTOMATIC1111's
 *   default, `pad_cond_uncond` off): the engine then runs the UNet on each
 *   alone.
 *
 * @module
 */

import { floatTensor, intTensor, type ResolvedIo, type Tensor, toFloat32 } from "../onnx/mod.ts";
import { ToolError } from "../mcp/tool.ts";
import {
  type PromptEmbeddingIndex,
  PromptSyntaxError,
  type ReadPrompt,
  readPrompt,
} from "../prompt/mod.ts";
import type { ClipEncoding } from "../tokenizer/mod.ts";
import type { ModelSession } from "./model_session.ts";

/** The tokenizer as the encoder needs it. */
export interface PromptTokenizer {
  /** 77 ids plus truncation facts (the "plain" reading). */
  encode(text: string): ClipEncoding;
  /** Token ids without BOS/EOS, not truncated (the "a1111" reading). */
  tokenize(text: string): number[];
  /** `<|startoftext|>`. */
  readonly bosId: number;
  /** `<|endoftext|>`, SD 1.x's padding too. */
  readonly eosId: number;
}

/** How prompts are read: `[prompt] syntax`, and the embeddings a prompt may call. */
export interface PromptReading {
  /** "plain": as is, cut at 77; "a1111": AUTOMATIC1111's syntax and chunks. */
  syntax: "a1111" | "plain";
  /** Textual-inversion embeddings whose rows the text encoder holds ("a1111" only). */
  embeddings?: PromptEmbeddingIndex;
}

/** Text embeddings `[batch, sequence, hidden]`. */
export interface PromptEmbeddings {
  /**
   * All prompts as one batch, `[batch, sequence, hidden]` (batch 0 is the
   * negative prompt when the batch is 2), in the encoder's dtype: in CPU
   * memory, or on the GPU when the encoder was opened to leave it there
   * (`device_outputs.ts`; `releaseDeviceTensor` frees it). Null when the
   * prompts have different lengths: then see {@link parts}.
   */
  hidden: Tensor | null;
  /** Shape of {@link hidden}; with `parts`, the batch and the positive prompt's length. */
  dims: [number, number, number];
  /**
   * Each prompt on its own, `[1, 77·k, hidden]`, negative first: set when
   * their lengths differ ({@link hidden} is null).
   */
  parts: Tensor[];
  /** Remarks for the result text (truncated prompts). */
  notes: string[];
  /** Names of the embeddings the prompts called, each once. */
  embeddingsUsed: string[];
}

/**
 * The note for a prompt longer than CLIP's window. `given` counts every CLIP
 * token including the start and end tokens, so it compares with the 77.
 */
export function truncationNote(
  which: "positive" | "negative",
  encoding: ClipEncoding,
  max = 77,
): string {
  return `${which} prompt was truncated to ${max} CLIP tokens (${
    encoding.tokenCount + 2
  } given); ` +
    `the end was ignored`;
}

/**
 * AUTOMATIC1111's "Original" emphasis on one chunk's encoding `z`
 * (`[77, hidden]`, row-major), in place: every position multiplied by its
 * weight, then the whole chunk by its mean before over its mean after
 * (`modules/sd_emphasis.py` `EmphasisOriginal.after_transformers`,
 * AUTOMATIC1111/stable-diffusion-webui commit f8391b8a). A chunk whose
 * weights are all 1 is left as it is (the factor is exactly 1 there).
 * Means are summed in float64 and the products rounded to float32.
 */
export function applyEmphasis(z: Float32Array, multipliers: readonly number[]): void {
  if (multipliers.every((m) => m === 1)) return;
  const width = z.length / multipliers.length;
  if (!Number.isInteger(width)) {
    throw new RangeError(
      `applyEmphasis: ${z.length} values are not ${multipliers.length} positions`,
    );
  }
  let before = 0;
  for (let i = 0; i < z.length; i++) before += z[i];
  let after = 0;
  for (let p = 0; p < multipliers.length; p++) {
    const m = Math.fround(multipliers[p]);
    for (let i = p * width; i < (p + 1) * width; i++) {
      z[i] = Math.fround(z[i] * m);
      after += z[i];
    }
  }
  // The means share the count, so their ratio is the sums' ratio.
  const factor = Math.fround(Math.fround(before / z.length) / Math.fround(after / z.length));
  for (let i = 0; i < z.length; i++) z[i] = Math.fround(z[i] * factor);
}

/**
 * Encodes the prompts. With `withNegative` the batch is
 * `[negative, positive]`, else only the positive prompt. `input_ids` is fed
 * in the dtype the model declares (int32 for the diffusers script, int64 for
 * Optimum).
 */
export async function encodePrompts(
  tokenizer: PromptTokenizer,
  session: ModelSession,
  io: ResolvedIo,
  positive: string,
  negative: string,
  withNegative: boolean,
  reading: PromptReading = { syntax: "plain" },
): Promise<PromptEmbeddings> {
  if (reading.syntax === "a1111") {
    const read: ReadPrompt[] = [];
    if (withNegative) read.push(readOne("negative_prompt", negative, tokenizer, reading));
    read.push(readOne("positive_prompt", positive, tokenizer, reading));
    return await encodeChunked(session, io, read);
  }
  const notes: string[] = [];
  const encodings: ClipEncoding[] = [];
  if (withNegative) {
    const neg = tokenizer.encode(negative);
    if (neg.truncated) notes.push(truncationNote("negative", neg, neg.ids.length));
    encodings.push(neg);
  }
  const pos = tokenizer.encode(positive);
  if (pos.truncated) notes.unshift(truncationNote("positive", pos, pos.ids.length));
  encodings.push(pos);

  const length = pos.ids.length;
  const ids = new Int32Array(encodings.length * length);
  encodings.forEach((e, i) => ids.set(e.ids, i * length));
  const hidden = await runEncoder(session, io, ids, encodings.length, length);
  const dims = hidden.dims;
  return {
    hidden,
    dims: [dims[0], dims[1], dims[2]],
    parts: [],
    notes,
    embeddingsUsed: [],
  };
}

/** Runs `rows` sequences of `length` ids; checks the output's shape. */
async function runEncoder(
  session: ModelSession,
  io: ResolvedIo,
  ids: Int32Array,
  rows: number,
  length: number,
): Promise<Tensor> {
  const input = io.inputs.input_ids;
  const output = io.outputs.last_hidden_state;
  const result = await session.run(
    { [input.name]: intTensor(input.dtype, ids, [rows, length]) },
    [output.name],
  );
  const hidden = result[output.name];
  const dims = hidden.dims;
  if (dims.length !== 3 || dims[0] !== rows || dims[1] !== length) {
    throw new Error(
      `text_encoder output \`${output.name}\`: expected shape [${rows},${length},hidden], ` +
        `got [${dims.join(",")}]`,
    );
  }
  return hidden;
}

/**
 * The most 75-token chunks one prompt may read as under "a1111". A prompt of
 * the contract's 10,000 characters in words reads as about 30 (some 2,200
 * CLIP tokens); only `BREAK` repeated with nothing between goes far past it
 * (one empty chunk per 6 characters, 1,666 at 10,000). Each chunk adds 77
 * key positions to every cross-attention of every UNet call: at 64 chunks
 * (4,928 positions) the first cross-attention's scores of a 512×512 image
 * are 4096 × 4928 × 8 heads, 0.65 GB in fp32, so the bound keeps one request
 * from exhausting the machine's memory.
 */
export const MAX_PROMPT_CHUNKS = 64;

/**
 * One prompt read; a weight that is not a number, or more than
 * {@link MAX_PROMPT_CHUNKS} chunks, is the caller's input error, naming the prompt.
 */
function readOne(
  which: string,
  text: string,
  tokenizer: PromptTokenizer,
  reading: PromptReading,
): ReadPrompt {
  let read: ReadPrompt;
  try {
    read = readPrompt(text, tokenizer, reading.embeddings);
  } catch (e) {
    if (e instanceof PromptSyntaxError) throw new ToolError("input", `${which}: ${e.message}`);
    throw e;
  }
  if (read.chunks.length > MAX_PROMPT_CHUNKS) {
    throw new ToolError(
      "input",
      `${which}: reads as ${read.chunks.length} chunks of 75 CLIP tokens (BREAK ends one), ` +
        `more than the ${MAX_PROMPT_CHUNKS} a prompt may have; use fewer BREAKs or a shorter prompt`,
    );
  }
  return read;
}

/** The "a1111" reading (module documentation) of the prompts `read`, negative first. */
async function encodeChunked(
  session: ModelSession,
  io: ResolvedIo,
  read: readonly ReadPrompt[],
): Promise<PromptEmbeddings> {
  const chunks = read.flatMap((r) => r.chunks);
  const length = chunks[0].tokens.length;
  const ids = new Int32Array(chunks.length * length);
  chunks.forEach((c, i) => ids.set(c.tokens, i * length));
  const out = await runEncoder(session, io, ids, chunks.length, length);
  const width = out.dims[2];
  const values = toFloat32(out);
  const chunkSize = length * width;
  // Emphasis per chunk, as AUTOMATIC1111's process_tokens applies it to each chunk's z.
  chunks.forEach((c, i) => {
    applyEmphasis(values.subarray(i * chunkSize, (i + 1) * chunkSize), c.multipliers);
  });
  const dtype = out.type;
  const used = [...new Set(read.flatMap((r) => r.embeddingsUsed))];
  const lengths = read.map((r) => r.chunks.length * length);
  const positiveLength = lengths[lengths.length - 1];
  if (lengths.every((l) => l === lengths[0])) {
    // One batch: the prompts' rows are already in order, each prompt's chunks one after another.
    return {
      hidden: floatTensor(dtype, values, [read.length, lengths[0], width]),
      dims: [read.length, lengths[0], width],
      parts: [],
      notes: [],
      embeddingsUsed: used,
    };
  }
  const parts: Tensor[] = [];
  let at = 0;
  for (const l of lengths) {
    parts.push(floatTensor(dtype, values.slice(at, at + l * width), [1, l, width]));
    at += l * width;
  }
  return {
    hidden: null,
    dims: [read.length, positiveLength, width],
    parts,
    notes: [],
    embeddingsUsed: used,
  };
}
