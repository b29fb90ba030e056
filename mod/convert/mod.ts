/**
 * Deterministic conversions of pinned model files into the files the engine
 * runs: an fp16 ONNX model widened to fp32 (what the CPU provider runs
 * fastest), a TAESD decoder `.safetensors` turned into its ONNX decoder, and
 * plain copies; each with a version that is part of the key under which
 * `mod/models` records and verifies what it wrote.
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
export { TAESD_CONVERTER_VERSION, taesdDecoderToOnnx } from "./taesd.ts";
