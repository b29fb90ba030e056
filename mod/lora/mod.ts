/**
 * LoRA support: kohya or diffusers/PEFT `.safetensors` files from `[lora] files`,
 * blended into the ONNX UNet(s) and text encoder at load time by patching
 * their initializers in memory (onnx-web's approach: ssube/onnx-web
 * `api/onnx_web/convert/diffusion/lora.py`).
 *
 * @module
 */

export {
  type FloatTensor,
  parseSafetensors,
  SafetensorsError,
  type SafetensorsFloatDtype,
  type StoredTensor,
} from "./safetensors.ts";
export {
  fixNodeName,
  KOHYA_PREFIXES,
  type KohyaLora,
  kohyaModules,
  type LoraModule,
  type LoraTarget,
} from "./kohya_keys.ts";
export { GemmAdder } from "./gemm_adder.ts";
export { PEFT_PREFIXES, peftModules } from "./peft_keys.ts";
export { loraModules } from "./lora_layout.ts";
export {
  LORA_MERGE_VERSION,
  type PatchedModel,
  patchModel,
  type PatchOptions,
  processAlive,
  type WeightedLora,
} from "./onnx_patch.ts";
export {
  checkLoraMatches,
  LoraError,
  type LoraFileConfig,
  type LoraMatchInput,
  LoraSet,
} from "./lora_set.ts";
export {
  assertLorasListedOnce,
  fileIdentity,
  findRepeatedLoras,
  type ListedOnceOptions,
  type LoraIdentity,
  type LoraListEntry,
  type RepeatedLora,
  RepeatedLoraError,
} from "./repeated.ts";
