/**
 * Reading model weights the way SD users have them, without Python and
 * without executing pickle code: safetensors files and PyTorch
 * `.ckpt`/`.pt`/`.bin` files tensor by tensor ({@link openWeightFile}), SD 1.x
 * checkpoints in the original single-file layout or as diffusers folders,
 * under diffusers' names ({@link openSd15Checkpoint}), and standalone VAE
 * files ({@link openVaeWeights}). Anything else is refused with a
 * {@link CheckpointError} whose message is one line naming what was found
 * and what is supported.
 *
 * @module
 */

export { CheckpointError } from "./errors.ts";
export { DTYPE_BYTES, type WeightDtype } from "./dtype.ts";
export {
  elementCount,
  reshaped,
  type WeightFile,
  type WeightFormat,
  type WeightMap,
  type WeightTensor,
} from "./weights.ts";
export { openWeightFile } from "./weight_file.ts";
export {
  openSd15Checkpoint,
  openVaeWeights,
  type Sd15Checkpoint,
  type Sd15Options,
  type VaeWeights,
} from "./sd15.ts";
export {
  emaKey,
  SD15_PREFIXES,
  textEncoderToDiffusers,
  unetToDiffusers,
  unetToOriginal,
  vaeToDiffusers,
  vaeToOriginal,
} from "./sd15_keys.ts";
