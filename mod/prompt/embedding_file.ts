/**
 * Textual-inversion embedding files, read as AUTOMATIC1111 reads them
 * (AUTOMATIC1111/stable-diffusion-webui `modules/textual_inversion/textual_inversion.py`,
 * `EmbeddingDatabase.load_from_file` and `create_embedding_from_data`):
 *
 * - the file's stem is the word that calls it (`EasyNegative.safetensors` → `EasyNegative`); a
 *   configured name may replace it;
 * - AUTOMATIC1111's own `.pt` holds `string_to_param` with exactly one `[n, width]` tensor;
 * - a `.safetensors` file, or diffusers' `learned_embeds` (`.safetensors` or `.bin`), holds
 *   exactly one tensor of any name: `emb_params` `[n, width]` (as kohya's sd-scripts writes
 *   it), or diffusers' concept `{"<token>": [width]}` (one vector);
 * - SDXL embeddings (`clip_l` and `clip_g`) are for SDXL's two text encoders, and are refused;
 * - its hash is the first 12 hex digits of the file's sha256 (AUTOMATIC1111's "TI hashes",
 *   `Embedding.shorthash`).
 *
 * Every form is read through the project's weight-file reader (mod/checkpoint `openWeightFile`):
 * `.pt` and `.bin` are PyTorch pickles, read without running any pickle code; nested dicts come
 * out flattened with `.` (`string_to_param.*`).
 *
 * @module
 */

import { basename, extname } from "node:path";
// weight_file.ts and errors.ts directly, not mod/checkpoint/mod.ts: `deno task models add`
// (no FFI) reads embeddings too, and the folder's face brings in more than the reader.
import { CheckpointError } from "../checkpoint/errors.ts";
import { openWeightFile } from "../checkpoint/weight_file.ts";
import { PROMPT_CHUNK_LENGTH } from "./read.ts";

/** The width of SD 1.x's CLIP ViT-L/14 token embeddings; other widths do not fit its encoder. */
export const SD15_EMBEDDING_WIDTH = 768;

/**
 * The largest embedding file read: real ones are a few KB to a few hundred KB (75 vectors of
 * 768 float32 values are 230 KB), so a bigger file is a checkpoint or a LoRA given by mistake.
 */
export const MAX_EMBEDDING_FILE_BYTES = 16 * 1024 * 1024;

/** File name endings an embedding may have (AUTOMATIC1111 reads these three). */
export const EMBEDDING_EXTENSIONS: readonly string[] = [".safetensors", ".pt", ".bin"];

/** Which layout the vectors were found in. */
export type EmbeddingFormat =
  /** `string_to_param` in an AUTOMATIC1111 `.pt`. */
  | "a1111-pt"
  /** One `[n, width]` tensor (`emb_params`) in a `.safetensors` file. */
  | "safetensors"
  /** diffusers' `learned_embeds`: one `{token: [width]}` entry. */
  | "diffusers-concept";

/** An embedding read from its file. */
export interface EmbeddingFile {
  /** The word that calls it: the configured name, else the file's stem. */
  name: string;
  /** The file it came from. */
  path: string;
  /** `count × width` float32 values, one vector after the other. */
  vectors: Float32Array;
  /** Number of vectors (positions it takes in a chunk), 1 to 75. */
  count: number;
  /** Values per vector: 768 for SD 1.x ({@link SD15_EMBEDDING_WIDTH}). */
  width: number;
  /** First 12 hex digits of the file's sha256 (AUTOMATIC1111's "TI hashes"). */
  hash: string;
  /** The layout the vectors were found in. */
  format: EmbeddingFormat;
}

/** A file that is not a usable embedding: the message names the file and what was found. */
export class EmbeddingFileError extends Error {
  /** Makes the error; `message` is complete. */
  constructor(message: string) {
    super(message);
    this.name = "EmbeddingFileError";
  }
}

/** A tensor as a weight-file reader hands it over: its shape, and its values on demand. */
export interface EmbeddingTensor {
  /** The element type the file stores (`F32`, `F16`, `BF16`, `F64`; others are refused). */
  dtype?: string;
  /** Dimensions. */
  shape: readonly number[];
  /** The values as float32. */
  read(): Promise<Float32Array> | Float32Array;
}

/** The word a file calls its embedding by when no name is configured: its stem. */
export function embeddingStem(path: string): string {
  const file = basename(path);
  return file.slice(0, file.length - extname(file).length);
}

/**
 * Reads an embedding file (`.safetensors`, `.pt`, `.bin`) and hashes it.
 *
 * @param name the configured word; default the file's stem
 * @throws {EmbeddingFileError} naming the file and what is wrong with it
 */
export async function loadEmbeddingFile(path: string, name?: string): Promise<EmbeddingFile> {
  const ext = extname(path).toLowerCase();
  if (!EMBEDDING_EXTENSIONS.includes(ext)) {
    throw new EmbeddingFileError(
      `${path}: an embedding file ends in ${EMBEDDING_EXTENSIONS.join(", ")}; got "${
        ext || "none"
      }"`,
    );
  }
  let size: number;
  try {
    size = (await Deno.stat(path)).size;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) {
      throw new EmbeddingFileError(`${path}: embedding file not found`);
    }
    throw e;
  }
  if (size > MAX_EMBEDDING_FILE_BYTES) {
    throw new EmbeddingFileError(
      `${path}: ${
        (size / 1024 / 1024).toFixed(1)
      } MiB is too big for a textual-inversion embedding ` +
        `(at most ${MAX_EMBEDDING_FILE_BYTES / 1024 / 1024} MiB; they are usually under 1 MiB): ` +
        "is it a checkpoint or a LoRA?",
    );
  }
  const word = name ?? embeddingStem(path);
  if (word.trim() === "") {
    throw new EmbeddingFileError(`${path}: the embedding's name is empty; give it a name`);
  }
  try {
    const file = await openWeightFile(path);
    try {
      const found = await embeddingVectors(file.tensors, path);
      return { name: word, path, ...found, hash: await shortHash(await Deno.readFile(path)) };
    } finally {
      file.close();
    }
  } catch (e) {
    if (e instanceof CheckpointError) throw new EmbeddingFileError(e.message);
    throw e;
  }
}

/**
 * Finds the vectors among a file's tensors, as `create_embedding_from_data` does: the one
 * `string_to_param` entry (names `string_to_param.<token>`, as a pickle reader flattens the
 * dict), else the file's one tensor. A 1-D tensor is one vector.
 *
 * @throws {EmbeddingFileError} for SDXL embeddings, several terms, no tensor, a shape that is not
 *   `[n, width]` or `[width]`, or more vectors than a chunk holds
 */
export async function embeddingVectors(
  tensors: ReadonlyMap<string, EmbeddingTensor>,
  source: string,
): Promise<{ vectors: Float32Array; count: number; width: number; format: EmbeddingFormat }> {
  // `string_to_token` (the placeholder's id in the training tokenizer) carries no vector.
  const names = [...tensors.keys()].filter((n) => !n.startsWith("string_to_token."));
  const listed = names.slice(0, 8).map((n) => JSON.stringify(n)).join(", ") +
    (names.length > 8 ? `, … (${names.length})` : "");
  const params = names.filter((n) => n.startsWith("string_to_param."));
  let key: string;
  let format: EmbeddingFormat;
  if (params.length > 0) {
    if (params.length !== 1) {
      throw new EmbeddingFileError(
        `${source}: the embedding file has multiple terms in it (string_to_param holds ` +
          `${params.length}); an embedding file holds one`,
      );
    }
    key = params[0];
    format = "a1111-pt";
  } else if (names.length < tensors.size) {
    // string_to_token without string_to_param: the original textual_inversion repository keeps
    // the vectors in a torch ParameterDict object, which the pickle-free reader does not open.
    throw new EmbeddingFileError(
      `${source}: string_to_token but no string_to_param tensor (a torch ParameterDict, as the ` +
        "original textual_inversion repository saves it, is not read); re-save the embedding " +
        'with AUTOMATIC1111 or as .safetensors holding one [n, 768] tensor "emb_params"',
    );
  } else if (tensors.has("clip_l") && tensors.has("clip_g")) {
    throw new EmbeddingFileError(
      `${source}: an SDXL embedding (clip_l and clip_g, for SDXL's two text encoders); ` +
        "Stable Diffusion 1.x takes one [n, 768] tensor",
    );
  } else if (names.length === 1) {
    key = names[0];
    format = tensors.get(key)!.shape.length === 1 ? "diffusers-concept" : "safetensors";
  } else {
    throw new EmbeddingFileError(
      names.length === 0
        ? `${source}: the file holds no tensor; an embedding file holds one [n, 768] tensor`
        : `${source}: the embedding file has multiple terms in it (${names.length} tensors: ` +
          `${listed}); an embedding file holds one [n, 768] tensor (emb_params, or diffusers' ` +
          "{token: [768]})",
    );
  }
  const tensor = tensors.get(key)!;
  const shape = tensor.shape;
  if (shape.length !== 1 && shape.length !== 2 || shape.some((d) => d < 1)) {
    throw new EmbeddingFileError(
      `${source}: tensor "${key}" has shape [${shape.join(", ")}]; an embedding is [n, width] ` +
        "or one vector [width]",
    );
  }
  if (tensor.dtype !== undefined && !["F32", "F16", "BF16", "F64"].includes(tensor.dtype)) {
    throw new EmbeddingFileError(
      `${source}: tensor "${key}" holds ${tensor.dtype} values; an embedding holds floats ` +
        "(F32, F16, BF16)",
    );
  }
  const count = shape.length === 1 ? 1 : shape[0];
  const width = shape[shape.length - 1];
  if (count > PROMPT_CHUNK_LENGTH) {
    throw new EmbeddingFileError(
      `${source}: ${count} vectors; a prompt chunk holds at most ${PROMPT_CHUNK_LENGTH}`,
    );
  }
  const vectors = await tensor.read();
  if (vectors.length !== count * width) {
    throw new EmbeddingFileError(
      `${source}: tensor "${key}" [${shape.join(", ")}] gave ${vectors.length} values`,
    );
  }
  if (!vectors.every(Number.isFinite)) {
    throw new EmbeddingFileError(`${source}: tensor "${key}" holds NaN or infinite values`);
  }
  return { vectors, count, width, format };
}

/** AUTOMATIC1111's `shorthash`: the first 12 hex digits of the file's sha256. */
async function shortHash(bytes: Uint8Array): Promise<string> {
  const digest = new Uint8Array(
    await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>),
  );
  return Array.from(digest.subarray(0, 6), (b) => b.toString(16).padStart(2, "0")).join("");
}
