/**
 * Reading model weights the way SD users have them, without Python and
 * without executing pickle code: safetensors files and PyTorch
 * `.ckpt`/`.pt`/`.bin` files tensor by tensor ({@link openWeightFile}), SD 1.x
 * checkpoints in the original single-file layout or as diffusers folders,
 * under diffusers' names ({@link openSd15Checkpoint}), and standalone VAE
 * files ({@link openVaeWeights}). Only headers, zip directories and pickles
 * are read when a file is opened; each tensor's bytes are read from the file
 * at its offset when asked. Measured on a 2-core x86-64 VM with full-size
 * random-weight SD 1.5 files: a 2.1 GB fp16 `.safetensors` opens in 26 ms and
 * is read whole, widened to float32, in 12 s; a 4.3 GB fp32 `.ckpt` opens in
 * 0.12 s (7.7 GB with EMA copies, zip64: 0.23 s) and is read in 3–5 s from
 * the page cache; peak RSS under 400 MB in each case.
 *
 * Accepted:
 *
 * | input | layouts |
 * | --- | --- |
 * | single file `.safetensors` | original CompVis/LDM names; F32, F16, BF16; `state_dict.` prefix; EMA copies (`model_ema.*`, used with `ema: true`) |
 * | single file `.ckpt`/`.pt`/`.bin` | the same names in PyTorch's zip format (zip64 too) or its legacy format; a `{"state_dict": …}` wrapper |
 * | text encoder in a single file | `cond_stage_model.transformer.text_model.*` and the older `cond_stage_model.transformer.*` |
 * | diffusers folder | `model_index.json`, `unet/`, `vae/`, `text_encoder/` with `*.safetensors` (or `.fp16.`), `*.bin`, or shards with an index |
 * | standalone VAE | original names (`encoder.down.0.block.0…`, 1×1-conv attention) or diffusers `AutoencoderKL` names (current or older), a `vae/` folder |
 *
 * Ignored and counted (`ignored`): scheduler buffers (`betas`, `alphas_cumprod`, …),
 * `loss.*`, unused `model_ema.*`, `position_ids`; in PyTorch files, everything outside
 * `state_dict` (optimizer states, epoch, global_step) is not a tensor of the model at all.
 *
 * Refused, each with one line naming what was found and what is supported:
 * SD 2.x (OpenCLIP `cond_stage_model.model.*`, a 1024-wide context or text encoder), SDXL
 * (`conditioner.embedders.*`, an XL diffusers folder), inpainting (9 input channels) and
 * instruct-pix2pix (8) UNets, a LoRA or a textual-inversion embedding given as a checkpoint, a
 * UNet whose context does not match its text encoder, a missing or incomplete part, names outside
 * SD 1.x's UNet or VAE, any weight missing or misshapen against SD 1.x's layout at the file's own
 * widths ({@link sd15Shapes}), an ONNX export folder, non-contiguous tensors, corrupt or truncated files
 * (safetensors header bounds, dtypes, overlapping ranges; zip directory, compressed or encrypted
 * members, member names outside `<dir>/data.pkl`, `<dir>/data/N`, `<dir>/version` and PyTorch
 * 2.x's data-only records), and any pickle global outside the allow-list of AUTOMATIC1111's
 * `modules/safe.py` (the global is named; nothing in the file is run).
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
  openSafetensors,
  parseSafetensorsHeader,
  type SafetensorsEntry,
  type SafetensorsHeader,
} from "./safetensors.ts";
export {
  openSd15Checkpoint,
  openVaeWeights,
  type Sd15Checkpoint,
  type Sd15Options,
  type VaeWeights,
} from "./sd15.ts";
export {
  inferSd15Widths,
  SD15_WIDTHS,
  type Sd15Shapes,
  sd15Shapes,
  type Sd15Widths,
  type ShapeMap,
} from "./sd15_shapes.ts";
export {
  emaKey,
  isVaeAttentionProjection,
  normaliseDiffusersVaeName,
  SD15_PREFIXES,
  textEncoderToDiffusers,
  unetToDiffusers,
  unetToOriginal,
  vaeToDiffusers,
  vaeToOriginal,
} from "./sd15_keys.ts";
