/**
 * Conversions into the files the engine runs: deterministic ones of pinned
 * model files — an fp16 ONNX model widened to fp32 (what the CPU provider
 * runs fastest), TAESD's published decoder `.safetensors` turned into the
 * ONNX tiny VAE decoder, plain copies — which `deno task models` runs after
 * the inputs' sizes and sha256 check out, each converter with a version that
 * is part of the key under which `mod/models` records and verifies what it
 * wrote; and {@link convertSd15}, SD 1.x weights (a checkpoint read by
 * `mod/checkpoint`, under diffusers' names) into a whole ONNX set in the
 * layout of the base sets, streamed one tensor at a time through the
 * project's graph builder (`mod/graph`).
 *
 * @module
 */

export { type Converter, CONVERTER_NAMES, CONVERTERS } from "./converters.ts";
export {
  FP32_CONVERTER_VERSION,
  WidenError,
  type WidenReport,
  widenToFp32,
  type WrittenFile,
} from "./fp32.ts";
export { TAESD_CONVERTER_VERSION, TaesdConversionError, taesdDecoderToOnnx } from "./taesd.ts";
export {
  convertSd15,
  type ConvertSd15Options,
  SD15_COMPONENTS,
  SD15_CONVERTER_VERSION,
  type Sd15Component,
  type Sd15Conversion,
  Sd15ConversionError,
  type Sd15File,
  type Sd15Progress,
  type Sd15WeightMaps,
} from "./sd15.ts";
