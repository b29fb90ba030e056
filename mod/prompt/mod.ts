/**
 * Prompts as AUTOMATIC1111 reads them: its emphasis syntax (`(word:1.2)`, `((word))`,
 * `[word]`, `BREAK`), long prompts in 75-token chunks with the comma back-off, and the
 * textual-inversion embeddings a prompt calls by name. This folder reads the text into chunks
 * of token ids and weights; the text encoder turns them into conditioning.
 *
 * @module
 */

export { BREAK_MARKER, isBreak, parsePromptAttention, PromptSyntaxError } from "./attention.ts";
export {
  DEFAULT_COMMA_PADDING_BACKTRACK,
  PROMPT_CHUNK_LENGTH,
  PROMPT_CHUNK_SIZE,
  type PromptChunk,
  type PromptEmbedding,
  PromptEmbeddingIndex,
  type PromptEmbeddings,
  type PromptTokenizer,
  type ReadPrompt,
  readPrompt,
  type ReadPromptOptions,
} from "./read.ts";
export {
  EMBEDDING_EXTENSIONS,
  type EmbeddingFile,
  EmbeddingFileError,
  type EmbeddingFormat,
  embeddingStem,
  type EmbeddingTensor,
  embeddingVectors,
  loadEmbeddingFile,
  MAX_EMBEDDING_FILE_BYTES,
  SD15_EMBEDDING_WIDTH,
} from "./embedding_file.ts";
export { type LoadedEmbeddings, loadEmbeddings } from "./embedding_set.ts";
