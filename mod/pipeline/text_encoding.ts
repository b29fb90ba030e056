/**
 * Prompt encoding: CLIP ids for the negative (unconditional) and positive
 * prompts, run through the text encoder in one batch when classifier-free
 * guidance is on (diffusers `pipeline_onnx_stable_diffusion.py`
 * `_encode_prompt`: uncond first, `np.concatenate([negative, positive])`).
 *
 * @module
 */

import { intTensor, type ResolvedIo, type Tensor } from "../onnx/mod.ts";
import type { ClipEncoding } from "../tokenizer/mod.ts";
import type { ModelSession } from "./model_session.ts";

/** The tokenizer as the encoder needs it. */
export interface PromptTokenizer {
  /** 77 ids plus truncation facts. */
  encode(text: string): ClipEncoding;
}

/** Text embeddings `[batch, sequence, hidden]`. */
export interface PromptEmbeddings {
  /**
   * The text encoder's output as it returned it, in its dtype, batch-major
   * (batch 0 is the negative prompt when the batch is 2): in CPU memory, or
   * on the GPU when the encoder was opened to leave it there
   * (`device_outputs.ts`; `releaseDeviceTensor` frees it).
   */
  hidden: Tensor;
  /** Shape `[batch, sequence, hidden]`. */
  dims: [number, number, number];
  /** Remarks for the result text (truncated prompts). */
  notes: string[];
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
): Promise<PromptEmbeddings> {
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
  const input = io.inputs.input_ids;
  const output = io.outputs.last_hidden_state;
  const result = await session.run(
    { [input.name]: intTensor(input.dtype, ids, [encodings.length, length]) },
    [output.name],
  );
  const hidden = result[output.name];
  const dims = hidden.dims;
  if (dims.length !== 3 || dims[0] !== encodings.length || dims[1] !== length) {
    throw new Error(
      `text_encoder output \`${output.name}\`: expected shape [${encodings.length},${length},hidden], ` +
        `got [${dims.join(",")}]`,
    );
  }
  return { hidden, dims: [dims[0], dims[1], dims[2]], notes };
}
