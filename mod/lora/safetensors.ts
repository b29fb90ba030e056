/**
 * Reads safetensors files (huggingface/safetensors README "Format"): an
 * 8-byte little-endian header size N, N bytes of JSON
 * `{name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__"?: {…}}`,
 * then the tensor bytes, offsets relative to the end of the header. Every
 * tensor is returned as float32 (F32, F16 and BF16 are accepted), with the
 * dtype the file stores it in.
 *
 * @module
 */

// The header checks are the checkpoint reader's (one set of bounds checks for every safetensors
// file); errors.ts, dtype.ts and safetensors.ts load neither onnxruntime-node nor anything that needs
// FFI, so `deno task models add` can read LoRA files through this parser.
import { CheckpointError } from "../checkpoint/errors.ts";
import { decodeToFloat32 } from "../checkpoint/dtype.ts";
import { parseSafetensorsHeader, safetensorsHeaderSize } from "../checkpoint/safetensors.ts";

/** Float element types a safetensors file may store (safetensors `Dtype` names). */
export type SafetensorsFloatDtype = "F32" | "F16" | "BF16";

/** A float tensor: shape and float32 values. */
export interface FloatTensor {
  /** Shape; `[]` for a scalar. */
  shape: number[];
  /** Values in row-major order, as float32. */
  data: Float32Array;
}

/** A float tensor read from a file, with the element type the file stores it in. */
export interface StoredTensor extends FloatTensor {
  /** The stored element type (the values are widened to float32). */
  dtype: SafetensorsFloatDtype;
}

/** A safetensors file that cannot be read; the message names the file. */
export class SafetensorsError extends Error {
  /** Creates an error with a complete message. */
  constructor(message: string) {
    super(message);
    this.name = "SafetensorsError";
  }
}

/** The float dtypes a LoRA may store. */
const FLOAT_DTYPES: readonly SafetensorsFloatDtype[] = ["F32", "F16", "BF16"];

/**
 * Parses safetensors bytes into float32 tensors by name, with the
 * checkpoint reader's header checks (bounds, dtype, sizes, no overlaps).
 *
 * @param bytes the whole file
 * @param source file name for error messages
 * @throws SafetensorsError naming `source` and what is wrong
 */
export function parseSafetensors(bytes: Uint8Array, source: string): Map<string, StoredTensor> {
  try {
    const n = safetensorsHeaderSize(bytes.subarray(0, 8), bytes.length, source);
    const header = parseSafetensorsHeader(
      bytes.subarray(8, 8 + n),
      bytes.length - 8 - n,
      source,
      FLOAT_DTYPES,
    );
    const out = new Map<string, StoredTensor>();
    for (const e of header.entries) {
      const count = e.shape.reduce((a, b) => a * b, 1);
      out.set(e.name, {
        dtype: e.dtype as SafetensorsFloatDtype,
        shape: e.shape,
        data: decodeToFloat32(
          bytes.subarray(header.dataStart + e.begin, header.dataStart + e.end),
          e.dtype,
          count,
        ),
      });
    }
    return out;
  } catch (e) {
    if (e instanceof CheckpointError) throw new SafetensorsError(e.message);
    throw e;
  }
}
