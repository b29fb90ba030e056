/**
 * Feeds in the dtype and shape a session declares, and outputs read back as
 * float32. Exports differ (int32 vs int64 `input_ids`, float vs int64 vs
 * scalar `timestep`, fp16 vs fp32 I/O; docs/models.md "Export flavours"), and ORT does not
 * convert feeds: the optimum Python runtime casts every feed to the declared
 * type (optimum-onnx `optimum/onnxruntime/base.py` `_prepare_onnx_inputs`),
 * so this module does the same for TypeScript callers.
 *
 * @module
 */

import { float16BitsToFloat32, float32ToFloat16Bits } from "./fp16.ts";
import { Tensor } from "./runtime.ts";

/**
 * How a UNet/ControlNet declares its timestep's shape
 * (Optimum's configs, diffusers' ONNX pipelines).
 */
export type TimestepKind = "batch" | "one" | "steps" | "scalar";

/** Float element types a model may declare for float I/O. */
export type FloatDtype = "float32" | "float16";

/** Builds a float32 or float16 tensor from float32 values. */
export function floatTensor(dtype: string, data: Float32Array, dims: readonly number[]): Tensor {
  checkSize(data.length, dims, dtype);
  switch (dtype) {
    case "float32":
      return new Tensor("float32", data, [...dims]);
    case "float16":
      return new Tensor("float16", float32ToFloat16Bits(data), [...dims]);
    case "float64":
      return new Tensor("float64", Float64Array.from(data), [...dims]);
    default:
      throw new Error(`floatTensor: unsupported float dtype ${dtype} (expected float32/float16)`);
  }
}

/** Builds an int32 or int64 tensor (token ids, integer timesteps). */
export function intTensor(
  dtype: string,
  data: ArrayLike<number>,
  dims: readonly number[],
): Tensor {
  checkSize(data.length, dims, dtype);
  if (dtype === "int32") return new Tensor("int32", Int32Array.from(data), [...dims]);
  if (dtype === "int64") {
    const out = new BigInt64Array(data.length);
    for (let i = 0; i < data.length; i++) out[i] = BigInt(Math.trunc(data[i]));
    return new Tensor("int64", out, [...dims]);
  }
  throw new Error(`intTensor: unsupported integer dtype ${dtype} (expected int32/int64)`);
}

/** Builds a tensor of any supported numeric dtype (float32/float16/float64/int32/int64). */
export function numericTensor(
  dtype: string,
  data: ArrayLike<number>,
  dims: readonly number[],
): Tensor {
  if (dtype === "int32" || dtype === "int64") return intTensor(dtype, data, dims);
  return floatTensor(dtype, Float32Array.from(data), dims);
}

/**
 * The timestep feed for one denoising step, in the declared dtype and shape:
 * "batch" and "steps" get `batch` copies (the UNet broadcasts either, diffusers
 * `unet_2d_condition.py` `timesteps.expand(sample.shape[0])`), "one" gets
 * shape [1] (as diffusers' ONNX pipeline feeds it), "scalar" gets rank 0.
 * Integer dtypes truncate like numpy's `astype(np.int64)`.
 */
export function timestepTensor(
  spec: { dtype: string; kind: TimestepKind },
  t: number,
  batch: number,
): Tensor {
  const dims = spec.kind === "scalar" ? [] : spec.kind === "one" ? [1] : [batch];
  const n = spec.kind === "batch" || spec.kind === "steps" ? batch : 1;
  return numericTensor(spec.dtype, new Array<number>(n).fill(t), dims);
}

/**
 * A one-value tensor (e.g. ControlNet `conditioning_scale`, a double) in the
 * declared dtype; rank follows the declared shape (`[]` or `[1]`).
 */
export function scalarTensor(
  dtype: string,
  value: number,
  declaredShape: readonly (number | string)[],
): Tensor {
  if (declaredShape.length > 1) {
    throw new Error(`scalarTensor: expected a shape of rank 0 or 1, got [${declaredShape}]`);
  }
  return numericTensor(dtype, [value], declaredShape.length === 0 ? [] : [1]);
}

/** Reads a float16/float32/float64 tensor back as float32 values (a copy for non-float32). */
export function toFloat32(tensor: Tensor): Float32Array {
  if (tensor.location !== "cpu" && tensor.location !== "cpu-pinned") {
    // onnxruntime-node 1.30 cannot download a device tensor (its getData() aborts the process).
    throw new Error(
      `toFloat32: the ${tensor.type} [${tensor.dims}] tensor is on the device ` +
        `(${tensor.location}); only another session can read it, as a feed`,
    );
  }
  const data = tensor.data as unknown;
  switch (tensor.type) {
    case "float32":
      return data as Float32Array;
    case "float16":
      if (data instanceof Uint16Array) return float16BitsToFloat32(data);
      // When Float16Array exists, onnxruntime-common hands out Float16Array views.
      return Float32Array.from(data as ArrayLike<number>);
    case "float64":
      return Float32Array.from(data as Float64Array);
    default:
      throw new Error(`toFloat32: expected a float tensor, got ${tensor.type}`);
  }
}

/** Returns the tensor unchanged when it already has `dtype`, else a float32/float16 copy. */
export function castFloatTensor(tensor: Tensor, dtype: string): Tensor {
  if (tensor.type === dtype) return tensor;
  return floatTensor(dtype, toFloat32(tensor), tensor.dims);
}

function checkSize(length: number, dims: readonly number[], dtype: string): void {
  const size = dims.reduce((a, b) => a * b, 1);
  if (size !== length) {
    throw new Error(
      `${dtype} tensor: ${length} values do not fill shape [${dims.join(",")}] (${size} values)`,
    );
  }
}
