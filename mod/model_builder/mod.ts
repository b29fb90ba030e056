/**
 * Builds test-sized ONNX models with the exact SD 1.5 I/O contract (names,
 * dtypes, symbolic axes, 8× latent ratio, the UNet residual pyramid), in the
 * diffusers-script and Optimum flavours, fp32 or fp16 I/O, plus ControlNets,
 * the residual UNet, and depth/YOLOX/DWPose-contract annotators. The same
 * builders emit full-width graphs with {@link SD15_DIMS} for benchmarks.
 *
 * @module
 */

export {
  type Attr,
  type Dim,
  type ElemType,
  type EncodedModel,
  type EncodeOptions,
  type ExternalDataOptions,
  Graph,
  type InitData,
  type WriteOptions,
} from "../graph/mod.ts";
export { type IoFloat, Layers, OPSET } from "../graph/mod.ts";
export {
  type AxisNames,
  axisNames,
  type ExportOptions,
  externalDataName,
  type Flavour,
  type ModelDims,
  SD15_DIMS,
  type TimestepStyle,
  TINY_DIMS,
  type VaeEncoderOutput,
  vaeEncoderOutput,
} from "./options.ts";
export { fnv1a, Rng } from "../graph/mod.ts";
export {
  buildTextEncoder,
  MAX_POSITIONS,
  TEXT_ENCODER_SCOPES,
  TOKEN_TABLE_ROWS,
} from "./text_encoder.ts";
export {
  buildControlNet,
  buildUnet,
  type ControlNetOptions,
  onnxWebOutputName,
  RESIDUAL_GROUP,
  RESIDUAL_LEVEL,
  residualChannels,
  residualInputName,
  type ResidualNaming,
  residualShape,
  UNET_SCOPES,
  type UnetOptions,
} from "./unet.ts";
export {
  buildHyperSdLora,
  buildTinyLora,
  encodeSafetensors,
  kohyaLoraTensors,
  type SafetensorsDtype,
  type SafetensorsEntry,
  type SafetensorsLayout,
  safetensorsLayout,
  type TinyLoraModule,
  tinyLoraModules,
  type TinyLoraOptions,
} from "./lora.ts";
export { buildVaeDecoder, buildVaeEncoder, LOGVAR_BIAS } from "./vae.ts";
export { buildTaesdDecoder, TAESD_CHANNELS } from "./taesd.ts";
export {
  buildFullControlNet,
  buildFullTextEncoder,
  buildFullUnet,
  buildFullVaeDecoder,
  buildFullVaeEncoder,
  type FullModel,
  type FullModule,
  type FullOptions,
  LCM_LORA_TARGETS,
  lcmLoraModules,
  SD15_PARAMS,
} from "./sd15_full.ts";
export { buildDepthModel } from "./depth.ts";
export {
  buildYoloxModel,
  YOLOX_OBJECTNESS,
  YOLOX_PERSON_PROB,
  YOLOX_SIZE,
  YOLOX_STRIDES,
} from "./yolox.ts";
export {
  buildDwposeModel,
  DWPOSE_INPUT,
  DWPOSE_KEYPOINTS,
  DWPOSE_PEAK,
  poseTemplate,
  SIMCC_RATIO,
} from "./dwpose.ts";
export { SCHEDULER_CONFIG, SCHEDULER_CONFIG_JSON } from "./scheduler_config.ts";
export {
  type LockComponent,
  type LockEntry,
  lockEntry,
  lockText,
  parseLock,
  sha256Hex,
} from "./lock.ts";
export {
  BUILDER_VERSION,
  buildTinyModelSet,
  type BuiltFile,
  CONTROLNETS,
  DEFAULT_SEED,
  SD_SETS,
  type SdSetSpec,
  STAMP_FILE,
  TINY_VAE_DECODER_PATH,
  tinyModelFiles,
  type TinyModelSet,
  type TinyModelSetOptions,
} from "./model_set.ts";
