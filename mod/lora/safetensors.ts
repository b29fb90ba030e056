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

// fp16.ts directly, not ../onnx/mod.ts: that loads onnxruntime-node, and `deno task models add`
// (no FFI permission) reads LoRA files through this parser.
import { float16BitsToFloat32 } from "../onnx/fp16.ts";

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

const BYTES: Record<SafetensorsFloatDtype, number> = { F32: 4, F16: 2, BF16: 2 };
/** The safetensors reference implementation caps the header at 100 MB. */
const MAX_HEADER = 100_000_000;

/**
 * Parses safetensors bytes into float32 tensors by name.
 *
 * @param bytes the whole file
 * @param source file name for error messages
 * @throws SafetensorsError naming `source` and what is wrong
 */
export function parseSafetensors(bytes: Uint8Array, source: string): Map<string, StoredTensor> {
  const fail = (why: string): never => {
    throw new SafetensorsError(`${source}: not a valid safetensors file: ${why}`);
  };
  if (bytes.length < 8) fail(`${bytes.length} bytes, shorter than the 8-byte header size`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerSize = view.getBigUint64(0, true);
  if (headerSize > BigInt(Math.min(MAX_HEADER, bytes.length - 8))) {
    fail(`header size ${headerSize} exceeds the file (${bytes.length} bytes) or 100 MB`);
  }
  const n = Number(headerSize);
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(8, 8 + n)));
  } catch (e) {
    fail(`header is not JSON: ${(e as Error).message}`);
  }
  if (header === null || typeof header !== "object" || Array.isArray(header)) {
    fail("header is not a JSON object");
  }
  const dataStart = 8 + n;
  const dataLength = bytes.length - dataStart;
  const out = new Map<string, StoredTensor>();
  for (const [name, info] of Object.entries(header as Record<string, unknown>)) {
    if (name === "__metadata__") continue;
    const t = info as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    if (t === null || typeof t !== "object") fail(`entry "${name}" is not an object`);
    const dtype = t.dtype;
    if (typeof dtype !== "string" || !Object.hasOwn(BYTES, dtype)) {
      fail(`tensor "${name}" has dtype ${JSON.stringify(dtype)} (supported: F32, F16, BF16)`);
    }
    const shape = t.shape;
    if (
      !Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)
    ) {
      fail(`tensor "${name}" has shape ${JSON.stringify(shape)}`);
    }
    const offsets = t.data_offsets;
    if (
      !Array.isArray(offsets) || offsets.length !== 2 ||
      !offsets.every((o) => Number.isSafeInteger(o) && o >= 0) || offsets[0] > offsets[1] ||
      offsets[1] > dataLength
    ) {
      fail(
        `tensor "${name}" has data_offsets ${JSON.stringify(offsets)} ` +
          `(data section is ${dataLength} bytes)`,
      );
    }
    const dims = shape as number[];
    const [begin, end] = offsets as number[];
    const count = dims.reduce((a, b) => a * b, 1);
    const size = BYTES[dtype as SafetensorsFloatDtype];
    if (end - begin !== count * size) {
      fail(
        `tensor "${name}" (${dtype} [${dims}]) needs ${count * size} bytes, ` +
          `data_offsets give ${end - begin}`,
      );
    }
    out.set(name, {
      dtype: dtype as SafetensorsFloatDtype,
      shape: [...dims],
      data: decode(bytes, dataStart + begin, count, dtype as SafetensorsFloatDtype),
    });
  }
  return out;
}

/** Decodes little-endian F32/F16/BF16 values into float32 (handles unaligned offsets). */
function decode(
  bytes: Uint8Array,
  at: number,
  count: number,
  dtype: SafetensorsFloatDtype,
): Float32Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset + at, count * BYTES[dtype]);
  const out = new Float32Array(count);
  if (dtype === "F32") {
    for (let i = 0; i < count; i++) out[i] = view.getFloat32(4 * i, true);
    return out;
  }
  const bits = new Uint16Array(count);
  for (let i = 0; i < count; i++) bits[i] = view.getUint16(2 * i, true);
  if (dtype === "F16") return float16BitsToFloat32(bits);
  // bfloat16 is the top half of a float32 (IEEE binary32 truncated to 16 bits).
  const wide = new Uint32Array(count);
  for (let i = 0; i < count; i++) wide[i] = bits[i] << 16;
  return new Float32Array(wide.buffer);
}
