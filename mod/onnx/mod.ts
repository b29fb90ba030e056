/**
 * ONNX Runtime access for the whole program: sessions (the only
 * `onnxruntime-node` import is in `runtime.ts`), the tensor class and device
 * tensors, the execution providers' start-up check and their errors, fp16
 * bit conversion, feeds in the declared dtype, the per-component I/O
 * contract, the load-time rewrite that makes a VAE encoder deterministic, and
 * the one that drops the zero addend of exported attention scores, and the
 * thread counts every session gets (all the cores the process may use).
 *
 * @module
 */

export {
  createSession,
  createSessionFromBytes,
  isDeviceTensor,
  listBackends,
  nativeLibraryDir,
  openCachedRewrite,
  releaseDeviceTensor,
  Session,
  Tensor,
} from "./runtime.ts";
export type {
  BackendInfo,
  ExecutionMode,
  ExecutionProvider,
  ExternalDataFile,
  Feeds,
  GraphOptimization,
  IoMeta,
  OutputLocation,
  SessionIo,
  SessionOptions,
  TensorConstructor,
} from "./runtime.ts";
export { checkExecutionProvider, type ProviderCheck } from "./provider_check.ts";
export {
  CUDA_INSTALL_COMMAND,
  ExecutionProviderError,
  explainProviderFailure,
  explainRunFailure,
  noAdapterText,
  noFloat16Text,
  ONNXRUNTIME_NODE_VERSION,
  type ProviderFacts,
} from "./providers.ts";
export {
  float16BitsToFloat32,
  float32ToFloat16Bits,
  fromFloat16Bits,
  toFloat16Bits,
} from "./fp16.ts";
export {
  castFloatTensor,
  floatTensor,
  intTensor,
  numericTensor,
  scalarTensor,
  timestepTensor,
  toFloat32,
} from "./tensors.ts";
export type { FloatDtype, TimestepKind } from "./tensors.ts";
export {
  assertResidualsMatch,
  checkSession,
  CONTRACTS,
  onnxWebResidualName,
  residualMismatches,
  residualName,
} from "./contract.ts";
export type {
  Component,
  ComponentContract,
  PortSpec,
  ResolvedIo,
  ResolvedPort,
  ResolvedResidual,
} from "./contract.ts";
export {
  type ExternalDataRef,
  ModelFormatError,
  type ModelInfo,
  type PrepackedBlob,
  readModelInfo,
} from "./model_info.ts";
export {
  exposeLatentParameters,
  LATENT_PARAMETERS,
  LATENT_PARAMETERS_REWRITE,
  type VaeEncoderGraph,
  VaeEncoderGraphError,
} from "./vae_encoder_graph.ts";
export {
  type ExternalReader,
  rewriteTextEncoder,
  type RewrittenTextEncoder,
  TEXT_ENCODER_REWRITE_VERSION,
  TextEncoderGraphError,
  type TextEncoderRewrite,
  textEncoderRewriteName,
  tokenTable,
} from "./text_encoder_graph.ts";
export { dropZeroAddends, type ZeroAddendReport } from "./zero_addend.ts";
export {
  type SessionThreads,
  sessionThreads,
  type ThreadSettings,
  threadsText,
} from "./threads.ts";
export { GLIBC_TUNABLES, type HugePages, hugePages, MALLOC_HUGETLB } from "./huge_pages.ts";
export {
  processUsableCores,
  type ReadText,
  type UsableCores,
  usableCores,
} from "./usable_cores.ts";
