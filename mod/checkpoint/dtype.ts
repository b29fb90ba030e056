/**
 * Element types of stored tensors (safetensors `Dtype` names, which PyTorch
 * storages map onto) and their decoding to float32.
 *
 * @module
 */

// fp16.ts directly, not ../onnx/mod.ts: that loads onnxruntime-node, and `deno task models add`
// (no FFI permission) reads weights files through this module.
import { float16BitsToFloat32 } from "../onnx/fp16.ts";

/** Element types a weights file may store (safetensors' names). */
export type WeightDtype =
  | "F64"
  | "F32"
  | "F16"
  | "BF16"
  | "I64"
  | "I32"
  | "I16"
  | "I8"
  | "U8"
  | "BOOL";

/** Bytes per element of each dtype. */
export const DTYPE_BYTES: Readonly<Record<WeightDtype, number>> = {
  F64: 8,
  F32: 4,
  F16: 2,
  BF16: 2,
  I64: 8,
  I32: 4,
  I16: 2,
  I8: 1,
  U8: 1,
  BOOL: 1,
};

/** The dtypes, in the order messages list them. */
export const WEIGHT_DTYPES: readonly WeightDtype[] = Object.keys(DTYPE_BYTES) as WeightDtype[];

let F16_TABLE: Float32Array | undefined;

/** float32 of every binary16 bit pattern (exact), made once. */
function f16Table(): Float32Array {
  if (!F16_TABLE) {
    F16_TABLE = float16BitsToFloat32(Uint16Array.from({ length: 65536 }, (_, i) => i));
  }
  return F16_TABLE;
}

/** Whether `s` names a supported dtype. */
export function isWeightDtype(s: unknown): s is WeightDtype {
  return typeof s === "string" && Object.hasOwn(DTYPE_BYTES, s);
}

/**
 * Decodes `count` little-endian elements of `dtype` from `bytes` into
 * float32 (floats widened or, for F64, rounded; integers converted; BOOL as
 * 0/1). Handles any byte alignment.
 */
export function decodeToFloat32(
  bytes: Uint8Array,
  dtype: WeightDtype,
  count: number,
): Float32Array {
  const need = count * DTYPE_BYTES[dtype];
  if (bytes.byteLength < need) {
    throw new RangeError(`${dtype} × ${count} needs ${need} bytes, got ${bytes.byteLength}`);
  }
  // Copy into an aligned buffer once so typed-array views can be used (files put tensors at any
  // offset); the copy is the size of the stored tensor, smaller than the float32 result.
  const aligned = bytes.byteOffset % 8 === 0 ? bytes : bytes.slice(0, need);
  const buf = aligned.buffer;
  const off = aligned.byteOffset;
  switch (dtype) {
    case "F32":
      // A buffer read for this tensor alone is used as it is; otherwise the values are copied out.
      return off === 0 && buf.byteLength === need && buf instanceof ArrayBuffer
        ? new Float32Array(buf, 0, count)
        : new Float32Array(buf.slice(off, off + need) as ArrayBuffer);
    case "F16": {
      // A table of all 65536 halves: a full-size UNet has 860 M of them to widen.
      const table = f16Table();
      const bits = new Uint16Array(buf, off, count);
      const out = new Float32Array(count);
      for (let i = 0; i < count; i++) out[i] = table[bits[i]];
      return out;
    }
    case "BF16": {
      // bfloat16 is the top half of a float32 (IEEE binary32 truncated to 16 bits).
      const bits = new Uint16Array(buf, off, count);
      const wide = new Uint32Array(count);
      for (let i = 0; i < count; i++) wide[i] = bits[i] << 16;
      return new Float32Array(wide.buffer);
    }
    case "F64":
      return Float32Array.from(new Float64Array(buf, off, count));
    case "I64": {
      const src = new BigInt64Array(buf, off, count);
      const out = new Float32Array(count);
      for (let i = 0; i < count; i++) out[i] = Number(src[i]);
      return out;
    }
    case "I32":
      return Float32Array.from(new Int32Array(buf, off, count));
    case "I16":
      return Float32Array.from(new Int16Array(buf, off, count));
    case "I8":
      return Float32Array.from(new Int8Array(buf, off, count));
    case "U8":
      return Float32Array.from(new Uint8Array(buf, off, count));
    case "BOOL": {
      const src = new Uint8Array(buf, off, count);
      const out = new Float32Array(count);
      for (let i = 0; i < count; i++) out[i] = src[i] ? 1 : 0;
      return out;
    }
  }
}
