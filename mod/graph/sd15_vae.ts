/**
 * The SD 1.x VAE's decoder and encoder as ONNX graphs (layers in `sd15.ts`):
 *
 * - VAE (`AutoencoderKL`): the decoder (post_quant_conv, conv_in, mid block
 *   with single-head attention, up blocks with nearest ×2 upsampling, conv_out)
 *   and the encoder (conv_in, down blocks with `Downsample2D`'s (0, 1, 0, 1)
 *   padding and stride-2 conv, mid block, conv_out, quant_conv), the latent
 *   drawn in the graph as the diffusers script exports `encode(x)[0].sample()`.
 *
 * I/O follows the diffusers script
 * (`scripts/convert_stable_diffusion_checkpoint_to_onnx.py`): `latent_sample`
 * → `sample` (decoder), `sample` → `latent_sample` (encoder).
 *
 * @module
 */

import { Layers } from "./layers.ts";
import { Blocks, resnet, type Sd15Model, type Sd15Weights } from "./sd15.ts";
import { SD15_VAE, type VaeConfig } from "./sd15_config.ts";

/** The VAE mid block (ResNet, single-head attention with biases, ResNet) under `scope`. */
function vaeMid(B: Blocks, h: string, c: number, scope: string): string {
  const { L } = B;
  const eps = 1e-6;
  h = resnet(B, h, c, c, `${scope}/resnets.0`, eps);
  const a = B.tokens(B.groupNorm(h, c, eps, `${scope}/attentions.0/group_norm`), c);
  const att = B.attention(a, a, c, c, 1, `${scope}/attentions.0`, true);
  h = L.add(h, B.image(att, h));
  return resnet(B, h, c, c, `${scope}/resnets.1`, eps);
}

/** Builds the VAE decoder (`latent_sample` → `sample`, diffusers script names). */
export function buildSd15VaeDecoder(
  weights: Sd15Weights,
  config: VaeConfig = SD15_VAE,
): Sd15Model {
  const cfg = config;
  const L = new Layers("vae_decoder", weights, "float32", true);
  const B = new Blocks(L, cfg.normGroups);
  const eps = 1e-6;
  const z4 = cfg.latentChannels;
  const widths = [...cfg.blockOutChannels].reverse();
  const z = L.floatIn("latent_sample", ["batch", "channels", "height", "width"]);
  let c = widths[0];
  let h = B.conv(B.conv(z, z4, z4, 1, "post_quant_conv"), z4, c, 3, "decoder/conv_in");
  h = vaeMid(B, h, c, "decoder/mid_block");
  widths.forEach((w, i) => {
    for (let j = 0; j <= cfg.layersPerBlock; j++) {
      h = resnet(B, h, c, w, `decoder/up_blocks.${i}/resnets.${j}`, eps);
      c = w;
    }
    if (i < widths.length - 1) {
      h = B.conv(L.upscale(h, 2, "nearest"), c, c, 3, `decoder/up_blocks.${i}/upsamplers.0/conv`);
    }
  });
  const out = B.conv(
    L.silu(B.groupNorm(h, c, eps, "decoder/conv_norm_out")),
    c,
    cfg.outChannels,
    3,
    "decoder/conv_out",
  );
  L.floatOut(out, "sample", ["batch", cfg.outChannels, "image_height", "image_width"]);
  return { graph: L.g, params: L.params, modules: B.modules };
}

/**
 * Builds the VAE encoder (`sample` → `latent_sample` drawn in the graph,
 * diffusers script names and I/O).
 */
export function buildSd15VaeEncoder(
  weights: Sd15Weights,
  config: VaeConfig = SD15_VAE,
): Sd15Model {
  const cfg = config;
  const L = new Layers("vae_encoder", weights, "float32", true);
  const B = new Blocks(L, cfg.normGroups);
  const eps = 1e-6;
  const widths = cfg.blockOutChannels;
  const x = L.floatIn("sample", ["batch", "channels", "height", "width"]);
  let c = widths[0];
  let h = B.conv(x, cfg.inChannels, c, 3, "encoder/conv_in");
  widths.forEach((w, i) => {
    for (let j = 0; j < cfg.layersPerBlock; j++) {
      h = resnet(B, h, c, w, `encoder/down_blocks.${i}/resnets.${j}`, eps);
      c = w;
    }
    // diffusers `Downsample2D` with padding 0: F.pad(x, (0, 1, 0, 1)), then a stride-2 conv.
    if (i < widths.length - 1) {
      h = B.conv(h, c, c, 3, `encoder/down_blocks.${i}/downsamplers.0/conv`, 2, [0, 0, 1, 1]);
    }
  });
  h = vaeMid(B, h, c, "encoder/mid_block");
  const z2 = 2 * cfg.latentChannels;
  h = B.conv(L.silu(B.groupNorm(h, c, eps, "encoder/conv_norm_out")), c, z2, 3, "encoder/conv_out");
  const params = B.conv(h, z2, z2, 1, "quant_conv");
  L.floatOut(sampleInGraph(L, params), "latent_sample", [
    "batch",
    cfg.latentChannels,
    "latent_height",
    "latent_width",
  ]);
  return { graph: L.g, params: L.params, modules: B.modules };
}

/**
 * `DiagonalGaussianDistribution(params).sample()` as the torch exporter
 * writes it for the diffusers script (diffusers `models/autoencoders/vae.py`):
 * `torch.chunk(params, 2, dim=1)` as `prim::ConstantChunk` at opset ≥ 13 (two
 * Slices whose bounds come from the runtime shape); `torch.clamp(logvar, -30,
 * 20)` as Clip; `torch.exp(0.5 · logvar)`; `randn` of the traced mean shape
 * as RandomNormalLike over ConstantOfShape(Shape(mean)), followed by the
 * `.to(dtype)` Cast of diffusers 0.6's `sample()`; `mean + std · noise`. With
 * `split`, the chunk is one Split as the Optimum exporter writes it, and no Cast.
 */
export function sampleInGraph(L: Layers, params: string, split = false): string {
  const g = L.g;
  let mean: string;
  let logvar: string;
  if (!split) {
    const axis = g.constI64([1]);
    const size = g.op("Gather", [g.op("Shape", [params]), axis], { axis: { i: 0 } });
    const chunk = g.op("Div", [g.op("Add", [size, g.constI64([1])]), g.constI64([2])]);
    const end = g.op("Mul", [chunk, g.constI64([2])]);
    mean = g.op("Slice", [params, g.constI64([0]), chunk, axis], {}, "mean");
    logvar = g.op("Slice", [params, chunk, end, axis], {}, "logvar");
  } else {
    [mean, logvar] = g.opN("Split", [params, g.constI64([4, 4])], 2, { axis: { i: 1 } }, "chunk");
  }
  const clamped = g.op("Clip", [logvar, g.constF([-30], []), g.constF([20], [])]);
  const std = g.op("Exp", [L.scale(clamped, 0.5)], {}, "std");
  const shape = g.op("ConstantOfShape", [g.op("Shape", [mean])]);
  let noise = g.op("RandomNormalLike", [shape], { dtype: { i: 1 } }, "noise", "RandomNormalLike_0");
  if (!split) noise = g.op("Cast", [noise], { to: { i: 1 } }, "noise_f32");
  return L.add(mean, L.mul(std, noise));
}
