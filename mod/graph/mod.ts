/**
 * The project's one ONNX graph builder: a protobuf graph writer that streams
 * weights one tensor at a time (`graph.ts`), layer helpers over it
 * (`layers.ts`), the SD 1.x architecture (`sd15.ts` and, one file each,
 * `sd15_unet.ts`, `sd15_text_encoder.ts`, `sd15_vae.ts`) at any width an
 * architecture config gives (`sd15_config.ts`, inferred from a checkpoint's
 * shapes), and where weights come from (`weights.ts`: a diffusers-named map
 * of a checkpoint, or a seeded random stream for test and bench stand-ins).
 * The converters (`mod/convert`) build from checkpoints with it; the test
 * and bench tooling builds its stand-ins with it.
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
  numel,
  type StreamedFile,
  type StreamWriteOptions,
  type WriteOptions,
} from "./graph.ts";
export { type IoFloat, Layers, OPSET } from "./layers.ts";
export { fnv1a, Rng } from "./rng.ts";
export { type Sd15Model, type Sd15Module, type Sd15Weights } from "./sd15.ts";
export { buildSd15ControlNet, buildSd15Unet, type UnetBuildOptions } from "./sd15_unet.ts";
export { buildSd15TextEncoder } from "./sd15_text_encoder.ts";
export { buildSd15VaeDecoder, buildSd15VaeEncoder, sampleInGraph } from "./sd15_vae.ts";
export {
  ArchitectureError,
  clipHeads,
  inferTextEncoderConfig,
  inferUnetConfig,
  inferVaeConfig,
  normGroups,
  SD15_TEXT_ENCODER,
  SD15_UNET,
  SD15_VAE,
  type TextEncoderConfig,
  type UnetConfig,
  unetHeads,
  type VaeConfig,
} from "./sd15_config.ts";
export {
  MapWeights,
  RandomWeights,
  transpose,
  type WeightData,
  type WeightEntry,
  type WeightMap,
  type WeightProblem,
  type WeightRequest,
  type WeightSource,
} from "./weights.ts";
