/**
 * CLIP tokenizer for Stable Diffusion 1.x, and the writer of its
 * `vocab.json` + `merges.txt` files from OpenAI's BPE list.
 *
 * @module
 */

export { CLIP_MAX_LENGTH, type ClipEncoding, ClipTokenizer } from "./clip_tokenizer.ts";
export {
  buildClipTokenizerJson,
  CLIP_SPLIT_PATTERN,
  type ClipTokenizerJson,
  parseMergesTxt,
} from "./clip_tokenizer_json.ts";
export {
  buildClipVocab,
  CLIP_BOS_TOKEN,
  CLIP_BPE_FIXTURE,
  CLIP_EOS_TOKEN,
  CLIP_MERGE_COUNT,
  type ClipVocab,
  mergesText,
  readClipBpeFile,
  vocabJsonText,
  writeClipTokenizerFiles,
} from "./clip_vocab.ts";
export { bytesToUnicode, type ByteUnicodePair } from "./bytes_to_unicode.ts";
