/**
 * Full-size SD 1.5 graphs for benchmarks: the product's one SD 1.x
 * architecture (`mod/graph/sd15.ts`) at SD 1.5's real config with random
 * weights from a seed (lazy: `Graph.writeFiles` makes and writes one tensor
 * at a time). At `layersPerBlock` 2 the UNet has exactly the real 859,520,964
 * parameters, the text encoder the real 123,060,480, the VAE decoder and
 * encoder the real halves of the 83,653,863-parameter AutoencoderKL. Node names
 * carry the diffusers module scopes, so kohya and PEFT LoRA keys of a real
 * SD 1.5 LoRA match them (mod/lora). External data `weights.pb` (UNet) or
 * `model.onnx_data` (the others, when written with external data).
 *
 * @module
 */

import {
  buildSd15ControlNet,
  buildSd15TextEncoder,
  buildSd15Unet,
  buildSd15VaeDecoder,
  buildSd15VaeEncoder,
  type Sd15Model,
  type Sd15Module,
} from "../graph/sd15.ts";
import { SD15_UNET } from "../graph/sd15_config.ts";
import { Rng } from "../graph/rng.ts";
import type { TinyLoraModule } from "./lora.ts";

/**
 * Real parameter counts (UNet, text encoder; the VAE decoder and encoder
 * halves of the 83,653,863-parameter AutoencoderKL; docs/performance.md).
 */
export const SD15_PARAMS = {
  unet: 859_520_964,
  textEncoder: 123_060_480,
  vae: 83_653_863,
  vaeDecoder: 49_490_199,
  vaeEncoder: 34_163_664,
} as const;

/** Options of the full-size builders. */
export interface FullOptions {
  /** ResNets (and transformers) per down block; 2 is SD 1.5, 1 a reduced-depth variant. */
  layersPerBlock?: number;
  /**
   * UNet only: also take the 13 ControlNet residuals as inputs
   * (`down_block_{0..11}_additional_residual`, `mid_block_additional_residual`:
   * the OnnxStack/axodox ControlNet-enabled UNet). The bench's residual UNet is
   * its own model file with its own weights (its own random stream).
   */
  residuals?: boolean;
}

/** A full-size graph ready to write, with its parameter count. */
export type FullModel = Sd15Model;

/** A torch Linear or Conv2d of a full-size graph, by its module path (what a LoRA adapts). */
export type FullModule = Sd15Module;

/** Builds the full-size UNet (diffusers-script I/O, fp32 graph; write fp16 with `float16`). */
export function buildFullUnet(seed: number, options: FullOptions = {}): FullModel {
  const lpb = options.layersPerBlock ?? SD15_UNET.layersPerBlock;
  const rng = new Rng(seed, options.residuals ? "full/controlnet_unet" : "full/unet");
  return buildSd15Unet(rng, {
    config: { ...SD15_UNET, layersPerBlock: lpb },
    residuals: options.residuals,
  });
}

/** Builds a full-size ControlNet (diffusers `ControlNetModel` for SD 1.5; `sd15.ts`). */
export function buildFullControlNet(seed: number, stream = "depth"): FullModel {
  return buildSd15ControlNet(new Rng(seed, `full/controlnet_${stream}`));
}

/** Builds the full-size CLIP text encoder (int32 `input_ids`, diffusers script). */
export function buildFullTextEncoder(seed: number): FullModel {
  return buildSd15TextEncoder(new Rng(seed, "full/text_encoder"));
}

/** Builds the full-size VAE decoder (`latent_sample` → `sample`, diffusers script names). */
export function buildFullVaeDecoder(seed: number): FullModel {
  return buildSd15VaeDecoder(new Rng(seed, "full/vae_decoder"));
}

/** Builds the full-size VAE encoder (`sample` → `latent_sample` drawn in the graph). */
export function buildFullVaeEncoder(seed: number): FullModel {
  return buildSd15VaeEncoder(new Rng(seed, "full/vae_encoder"));
}

/**
 * The module names an LCM LoRA for SD 1.5 adapts: the default
 * `lora_target_modules` of diffusers'
 * `examples/consistency_distillation/train_lcm_distill_lora_sd.py` (attention
 * projections, proj_in/out, the feed-forward, the ResNet convs and time
 * projections, the down/upsampler convs). At rank 64 in fp16 the full UNet's
 * 278 such modules come to 134,504,448 bytes of tensors, which with the
 * safetensors header and alphas is the 134,621,556-byte published
 * latent-consistency/lcm-lora-sdv1-5 (models.lock).
 */
export const LCM_LORA_TARGETS: readonly string[] = [
  "to_q",
  "to_k",
  "to_v",
  "to_out.0",
  "proj_in",
  "proj_out",
  "ff/net.0/proj",
  "ff/net.2",
  "conv1",
  "conv2",
  "conv_shortcut",
  "downsamplers.0/conv",
  "upsamplers.0/conv",
  "time_emb_proj",
];

/** The UNet modules of `unet` an LCM LoRA adapts, as kohya-keyed LoRA modules. */
export function lcmLoraModules(unet: FullModel): TinyLoraModule[] {
  return unet.modules
    .filter((m) => LCM_LORA_TARGETS.some((t) => m.scope.endsWith(`/${t}`)))
    .map((m) => ({
      ...m,
      key: "lora_unet_" + m.scope.replaceAll("/", "_").replaceAll(".", "_"),
    }));
}
