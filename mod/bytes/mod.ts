/**
 * Byte helpers shared by folders that have no other common ground (ONNX
 * writers, checkpoint fixtures, file readers, the model lock and the
 * optimised-graph cache): joining byte arrays, the streaming sha256 of a
 * file. Nothing here imports another folder.
 *
 * @module
 */

export { concatBytes } from "./concat.ts";
export { hashFileInto, sha256File } from "./sha256_file.ts";
