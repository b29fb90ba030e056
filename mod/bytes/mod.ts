/**
 * Byte-array helpers shared by folders that have no other common ground
 * (ONNX writers, checkpoint fixtures, file readers). Nothing here imports
 * another folder.
 *
 * @module
 */

export { concatBytes } from "./concat.ts";
