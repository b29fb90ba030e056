/**
 * The SD 1.x UNet and its ControlNet as ONNX graphs (layers in `sd15.ts`):
 *
 * - UNet (`UNet2DConditionModel`): conv_in, sinusoidal time embedding
 *   (flip_sin_to_cos, shift 0) through linear_1/SiLU/linear_2, down blocks of
 *   ResNets (GroupNorm, SiLU, 3×3 convs, time projection, 1×1 shortcut) and
 *   Transformer2D (GroupNorm, 1×1 proj_in, LayerNorm + self-attention,
 *   LayerNorm + cross-attention on the text, LayerNorm + GEGLU feed-forward,
 *   proj_out, residual) with stride-2 downsampling, the mid block (ResNet,
 *   Transformer, ResNet), up blocks with skip concatenation and nearest ×2
 *   upsampling, GroupNorm, SiLU, conv_out. Optionally the 13 ControlNet
 *   residuals as inputs, added as `down_block_additional_residuals` are.
 * - ControlNet (`ControlNetModel`): the UNet's encoder half, the conditioning
 *   embedding and the 13 zero convs, scaled by `conditioning_scale`.
 *
 * I/O follows the diffusers script
 * (`scripts/convert_stable_diffusion_checkpoint_to_onnx.py`): float
 * `sample`, `timestep [batch]`, `encoder_hidden_states` → `out_sample`.
 *
 * @module
 */

import { Layers } from "./layers.ts";
import { Blocks, resnet, type Sd15Model, type Sd15Weights } from "./sd15.ts";
import { SD15_UNET, type UnetConfig } from "./sd15_config.ts";

/** diffusers `Transformer2DModel` (1×1 conv proj_in/out) of `BasicTransformerBlock`s. */
function transformer(
  B: Blocks,
  x: string,
  c: number,
  ctx: string,
  scope: string,
  cfg: UnetConfig,
): string {
  const { L } = B;
  const heads = cfg.attentionHeads;
  const h0 = B.conv(B.groupNorm(x, c, 1e-6, `${scope}/norm`), c, c, 1, `${scope}/proj_in`);
  let t = B.tokens(h0, c);
  for (let i = 0; i < cfg.transformerLayers; i++) {
    const blk = `${scope}/transformer_blocks.${i}`;
    let n = B.layerNorm(t, c, `${blk}/norm1`);
    t = L.add(t, B.attention(n, n, c, c, heads, `${blk}/attn1`));
    n = B.layerNorm(t, c, `${blk}/norm2`);
    t = L.add(t, B.attention(n, ctx, c, cfg.crossAttentionDim, heads, `${blk}/attn2`));
    n = B.layerNorm(t, c, `${blk}/norm3`);
    // GEGLU (diffusers `attention.py`): proj to 2·4c, chunk, hidden · gelu(gate).
    const proj = B.linear(n, c, 8 * c, `${blk}/ff/net.0/proj`);
    const [a, gate] = L.g.opN("Split", [proj, L.g.constI64([4 * c, 4 * c])], 2, {
      axis: { i: -1 },
    });
    t = L.add(t, B.linear(L.mul(a, B.gelu(gate)), 4 * c, c, `${blk}/ff/net.2`));
  }
  const h = B.conv(B.image(t, h0), c, c, 1, `${scope}/proj_out`);
  return L.add(h, x);
}

/**
 * Sinusoidal timestep embedding (diffusers `get_timestep_embedding`,
 * flip_sin_to_cos, shift 0: [cos, sin] of C0/2 frequencies) through the
 * C0 → T → T MLP (`time_embedding`).
 */
function timeEmbedding(B: Blocks, t: string, cfg: UnetConfig): { v: string; dim: number } {
  const { L } = B;
  const g = L.g;
  const c0 = cfg.blockOutChannels[0];
  const half = c0 / 2;
  const freqs = Array.from({ length: half }, (_, i) => Math.exp(-Math.log(10000) * i / half));
  // In float32 even in an fp16 model, as diffusers computes it (`timesteps[:, None].float() *
  // exponent`) before `t_emb.to(dtype)`: in half precision t·f near t = 999 would be rounded
  // to 0.5 and the high frequencies lost.
  const t32 = g.keepFloat32(g.op("Cast", [t], { to: { i: 1 } }, "timestep_f32"));
  const arg = L.mul(L.unsqueeze(t32, [1]), g.keepFloat32(g.constF(freqs, [1, half])));
  const sinusoids = g.op("Concat", [g.op("Cos", [arg]), g.op("Sin", [arg])], { axis: { i: 1 } });
  const emb = g.op("Cast", [sinusoids], { to: { i: 1 } }, "t_emb"); // float16 in an fp16 model
  const dim = cfg.timeEmbedDim;
  const v = B.linear(
    L.silu(B.linear(emb, c0, dim, "time_embedding/linear_1")),
    dim,
    dim,
    "time_embedding/linear_2",
  );
  return { v, dim };
}

/**
 * The down blocks and the mid block (shared by the UNet and the ControlNet):
 * returns the skip tensors (conv_in, each ResNet/Transformer pair, each
 * downsampler: 12 for SD 1.5) and the mid block's output.
 */
function downAndMid(
  B: Blocks,
  h0: string,
  temb: { v: string; dim: number },
  ctx: string,
  cfg: UnetConfig,
): { skips: Array<{ v: string; c: number }>; mid: string } {
  const eps = cfg.normEps;
  const widths = cfg.blockOutChannels;
  const last = widths.length - 1;
  let h = h0;
  let c = widths[0];
  const skips: Array<{ v: string; c: number }> = [{ v: h, c }];
  widths.forEach((w, i) => {
    for (let j = 0; j < cfg.layersPerBlock; j++) {
      h = resnet(B, h, c, w, `down_blocks.${i}/resnets.${j}`, eps, temb);
      c = w;
      if (cfg.crossAttention[i]) {
        h = transformer(B, h, c, ctx, `down_blocks.${i}/attentions.${j}`, cfg);
      }
      skips.push({ v: h, c });
    }
    if (i < last) {
      h = B.conv(h, c, c, 3, `down_blocks.${i}/downsamplers.0/conv`, 2);
      skips.push({ v: h, c });
    }
  });
  h = resnet(B, h, c, c, "mid_block/resnets.0", eps, temb);
  h = transformer(B, h, c, ctx, "mid_block/attentions.0", cfg);
  h = resnet(B, h, c, c, "mid_block/resnets.1", eps, temb);
  return { skips, mid: h };
}

/** The residual's name (OnnxStack naming): `down_block_<i>_additional_residual`, last = mid. */
function residualName(i: number, count: number): string {
  return i === count - 1 ? "mid_block_additional_residual" : `down_block_${i}_additional_residual`;
}

/** Options of {@link buildSd15Unet}. */
export interface UnetBuildOptions {
  /** The architecture; default SD 1.5's. */
  config?: UnetConfig;
  /**
   * Also take the ControlNet residuals as inputs (`down_block_{i}_additional_residual`,
   * `mid_block_additional_residual`: the OnnxStack/axodox ControlNet-enabled UNet), added to
   * the skip connections and the mid block as diffusers `UNet2DConditionModel`
   * does with `down_block_additional_residuals`.
   */
  residuals?: boolean;
  /** Graph name; default "unet". */
  name?: string;
}

/** Builds the UNet (diffusers-script I/O, fp32 graph; write fp16 with `float16`). */
export function buildSd15Unet(weights: Sd15Weights, options: UnetBuildOptions = {}): Sd15Model {
  const cfg = options.config ?? SD15_UNET;
  const L = new Layers(options.name ?? "unet", weights, "float32", true);
  const B = new Blocks(L, cfg.normGroups);
  const g = L.g;
  const widths = cfg.blockOutChannels;
  const sample = L.floatIn("sample", ["batch", "channels", "height", "width"]);
  const t = L.floatIn("timestep", ["batch"]);
  const ctx = L.floatIn("encoder_hidden_states", ["batch", "sequence", cfg.crossAttentionDim]);
  const eps = cfg.normEps;
  const temb = timeEmbedding(B, t, cfg);
  const convIn = B.conv(sample, cfg.inChannels, widths[0], 3, "conv_in");
  const down = downAndMid(B, convIn, temb, ctx, cfg);
  const skips = down.skips;
  let h = down.mid;
  if (options.residuals) {
    // diffusers: down_block_res_samples[i] + down_block_additional_residuals[i]; mid + mid residual.
    const count = skips.length + 1;
    skips.forEach((s, i) => {
      s.v = L.add(s.v, L.floatIn(residualName(i, count), ["batch", s.c, `res_h${i}`, `res_w${i}`]));
    });
    const m = count - 1;
    h = L.add(
      h,
      L.floatIn(residualName(m, count), ["batch", widths.at(-1)!, `res_h${m}`, `res_w${m}`]),
    );
  }
  let c = widths.at(-1)!;
  const up = [...widths].reverse();
  const attn = [...cfg.crossAttention].reverse();
  up.forEach((w, i) => {
    for (let j = 0; j <= cfg.layersPerBlock; j++) {
      const skip = skips.pop()!;
      const cat = g.op("Concat", [h, skip.v], { axis: { i: 1 } });
      h = resnet(B, cat, c + skip.c, w, `up_blocks.${i}/resnets.${j}`, eps, temb);
      c = w;
      if (attn[i]) h = transformer(B, h, c, ctx, `up_blocks.${i}/attentions.${j}`, cfg);
    }
    if (i < up.length - 1) {
      h = B.conv(L.resizeTo(h, skips.at(-1)!.v), c, c, 3, `up_blocks.${i}/upsamplers.0/conv`);
    }
  });
  const out = B.conv(
    L.silu(B.groupNorm(h, widths[0], eps, "conv_norm_out")),
    widths[0],
    cfg.outChannels,
    3,
    "conv_out",
  );
  L.floatOut(out, "out_sample", ["batch", cfg.outChannels, "height", "width"]);
  return { graph: g, params: L.params, modules: B.modules };
}

/** diffusers `ControlNetConditioningEmbedding` channels of SD 1.5's ControlNets. */
const CONDITIONING_CHANNELS = [16, 32, 96, 256];

/**
 * Builds a ControlNet (diffusers `ControlNetModel`): the UNet's time
 * embedding, conv_in, down and mid blocks, plus `controlnet_cond_embedding`
 * (conv 3→16, six SiLU convs 16/32/96/256 with three stride-2 steps,
 * conv_out → C0, added after conv_in) and one 1×1 "zero conv" per residual
 * (`controlnet_down_blocks.{i}`, `controlnet_mid_block`). I/O as OnnxStack's
 * export (`OnnxStack.Converter/ControlNet/models.py`): `sample`, `timestep`,
 * `encoder_hidden_states`, `controlnet_cond` `[B, 3, 8h, 8w]`,
 * `conditioning_scale` double `[1]` → the residuals.
 */
export function buildSd15ControlNet(
  weights: Sd15Weights,
  config: UnetConfig = SD15_UNET,
): Sd15Model {
  const cfg = config;
  const widths = cfg.blockOutChannels;
  const L = new Layers("controlnet", weights, "float32", true);
  const B = new Blocks(L, cfg.normGroups);
  const sample = L.floatIn("sample", ["batch", cfg.inChannels, "height", "width"]);
  const t = L.floatIn("timestep", ["batch"]);
  const ctx = L.floatIn("encoder_hidden_states", ["batch", "sequence", cfg.crossAttentionDim]);
  const cond = L.floatIn("controlnet_cond", ["batch", 3, "image_height", "image_width"]);
  const scale = L.toFloat(L.input("conditioning_scale", "float64", [1]));
  const temb = timeEmbedding(B, t, cfg);
  const ce = "controlnet_cond_embedding";
  const chans = CONDITIONING_CHANNELS;
  let e = L.silu(B.conv(cond, 3, chans[0], 3, `${ce}/conv_in`));
  for (let i = 0; i < 3; i++) {
    e = L.silu(B.conv(e, chans[i], chans[i], 3, `${ce}/blocks.${2 * i}`));
    e = L.silu(B.conv(e, chans[i], chans[i + 1], 3, `${ce}/blocks.${2 * i + 1}`, 2));
  }
  e = B.conv(e, chans[3], widths[0], 3, `${ce}/conv_out`);
  const h0 = L.add(B.conv(sample, cfg.inChannels, widths[0], 3, "conv_in"), e);
  const { skips, mid } = downAndMid(B, h0, temb, ctx, cfg);
  const count = skips.length + 1;
  skips.forEach((s, i) => {
    const r = L.mul(B.conv(s.v, s.c, s.c, 1, `controlnet_down_blocks.${i}`), scale);
    L.floatOut(r, residualName(i, count), ["batch", s.c, `res_h${i}`, `res_w${i}`]);
  });
  const c = widths.at(-1)!;
  const m = L.mul(B.conv(mid, c, c, 1, "controlnet_mid_block"), scale);
  const last = count - 1;
  L.floatOut(m, residualName(last, count), ["batch", c, `res_h${last}`, `res_w${last}`]);
  return { graph: L.g, params: L.params, modules: B.modules };
}
