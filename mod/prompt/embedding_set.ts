/**
 * The configured embeddings (`[prompt] embeddings`) loaded together, each vector given a row of
 * the text encoder's token table after the tokenizer's vocabulary, in config order: the first
 * embedding's vectors take ids `firstRow`, `firstRow + 1`, …, the next one's follow. This is
 * what diffusers' `load_textual_inversion` does (huggingface/diffusers
 * `src/diffusers/loaders/textual_inversion.py`: it adds `<token>`, `<token>_1`, … to the
 * tokenizer and one row per vector to the token embedding); the prompt then carries those ids
 * where AUTOMATIC1111 carries placeholders.
 *
 * @module
 */

import { type EmbeddingFile, loadEmbeddingFile } from "./embedding_file.ts";
import type { PromptEmbedding } from "./read.ts";

/** Configured embeddings, read and placed. */
export interface LoadedEmbeddings {
  /** The files as read, in config order. */
  files: EmbeddingFile[];
  /** What the prompt reader takes: each name with its rows and hash. */
  embeddings: PromptEmbedding[];
  /** The rows' vectors in row order (`rows × width` values), for the token table. */
  rows: Float32Array;
  /** The width all files share; undefined when there are none. */
  width: number | undefined;
}

/**
 * Loads each configured embedding file and places its vectors at rows from `firstRow` on.
 *
 * @throws {EmbeddingFileError} for a file that is not a usable embedding
 * @throws {Error} when two files' widths differ (one of them does not fit the text encoder)
 */
export async function loadEmbeddings(
  configured: ReadonlyArray<{ path: string; name: string }>,
  firstRow: number,
): Promise<LoadedEmbeddings> {
  const files: EmbeddingFile[] = [];
  for (const c of configured) files.push(await loadEmbeddingFile(c.path, c.name));
  const width = files[0]?.width;
  const odd = files.find((f) => f.width !== width);
  if (odd !== undefined) {
    throw new Error(
      `${odd.path}: vectors of width ${odd.width}, where ${files[0].path} has ${width}; ` +
        "all embeddings are for one text encoder",
    );
  }
  const embeddings: PromptEmbedding[] = [];
  const rows = new Float32Array(files.reduce((n, f) => n + f.vectors.length, 0));
  let row = firstRow;
  let at = 0;
  for (const f of files) {
    embeddings.push({
      name: f.name,
      rowIds: Array.from({ length: f.count }, (_, k) => row + k),
      hash: f.hash,
    });
    rows.set(f.vectors, at);
    row += f.count;
    at += f.vectors.length;
  }
  return { files, embeddings, rows, width };
}
