/**
 * The SD 1.x architecture as ONNX graphs, one definition for every use: the
 * checkpoint converter (weights from a diffusers-named map) and the test and
 * bench stand-ins (seeded random weights), at any width an architecture
 * config gives (`sd15_config.ts`: the real SD 1.5, or test-sized ones).
 * Structure and names follow diffusers (`models/unets/unet_2d_condition.py`,
 * `unet_2d_blocks.py`, `resnet.py`, `attention.py`, `attention_processor.py`,
 * `embeddings.py`, `autoencoders/vae.py`) and transformers
 * (`models/clip/modeling_clip.py`):
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
 * - Text encoder (`CLIPTextModel`): token and position embeddings, pre-norm
 *   layers of causal self-attention and quick-GELU MLP, final LayerNorm;
 *   `pooler_output` at the highest token id (the EOS token).
 * - VAE (`AutoencoderKL`): the decoder (post_quant_conv, conv_in, mid block
 *   with single-head attention, up blocks with nearest ×2 upsampling, conv_out)
 *   and the encoder (conv_in, down blocks with `Downsample2D`'s (0, 1, 0, 1)
 *   padding and stride-2 conv, mid block, conv_out, quant_conv), the latent
 *   drawn in the graph as the diffusers script exports `encode(x)[0].sample()`.
 *
 * Node names carry the diffusers module scopes (`/down_blocks.0/resnets.0/conv1/Conv`),
 * so kohya and PEFT LoRA keys match them (mod/lora). Every trainable tensor is
 * asked of the weight source by its diffusers state-dict name
 * (`down_blocks.0.resnets.0.conv1.weight`); values are made or read only when
 * the model is written. I/O follows the diffusers script
 * (`scripts/convert_stable_diffusion_checkpoint_to_onnx.py`): int32
 * `input_ids`, float `timestep [batch]`, `sample`/`encoder_hidden_states` →
 * `out_sample`, `latent_sample` → `sample`, `sample` → `latent_sample`.
 *
 * @module
 */

import type { Graph } from "./graph.ts";
import { Layers } from "./layers.ts";
import type { Rng } from "./rng.ts";
import {
  SD15_TEXT_ENCODER,
  SD15_UNET,
  SD15_VAE,
  type TextEncoderConfig,
  type UnetConfig,
  type VaeConfig,
} from "./sd15_config.ts";
import type { WeightSource } from "./weights.ts";

/** A graph ready to write, with its parameter count and Linear/Conv modules. */
export interface Sd15Model {
  /** The graph; write it with `graph.writeModel` (or `writeFiles` for random weights). */
  graph: Graph;
  /** Trainable parameters. */
  params: number;
  /** Its Linear and Conv modules (for LoRAs shaped like real ones). */
  modules: Sd15Module[];
}

/** A torch Linear or Conv2d of a graph, by its module path (what a LoRA adapts). */
export interface Sd15Module {
  /** diffusers module path with "/" between modules, e.g. `down_blocks.0/resnets.0/conv1`. */
  scope: string;
  /** torch Linear [out, in] or Conv2d [out, in, k, k]. */
  kind: "linear" | "conv";
  /** Input features / channels. */
  in: number;
  /** Output features / channels. */
  out: number;
  /** Kernel size (1 for linear). */
  k: number;
}

/** Where a builder's weights come from: a random stream (lazy values) or a weight source. */
export type Sd15Weights = Rng | WeightSource;

/** The diffusers state-dict name of a parameter of the module at `scope` ("/"-separated). */
function stateName(scope: string, param: "weight" | "bias"): string {
  return `${scope.replaceAll("/", ".")}.${param}`;
}

/** The shared layer vocabulary of the SD graphs. */
class Blocks {
  readonly L: Layers;
  readonly groups: number;
  /** Every Linear and Conv written, in order. */
  readonly modules: Sd15Module[] = [];
  constructor(L: Layers, groups: number) {
    this.L = L;
    this.groups = groups;
  }

  /** torch GroupNorm as torch exports it: Reshape → InstanceNormalization → Reshape → affine. */
  groupNorm(x: string, c: number, eps: number, scope: string): string {
    const { L, groups } = this;
    const g = L.g;
    const r = L.reshape(x, [0, groups, -1]);
    const ones = g.init("gn_one", "float32", [groups], new Float32Array(groups).fill(1));
    const zeros = g.init("gn_zero", "float32", [groups], new Float32Array(groups));
    const n = g.op("InstanceNormalization", [r, ones, zeros], { epsilon: { f: eps } });
    const back = g.op("Reshape", [n, g.op("Shape", [x])]);
    const gamma = this.norm(scope, "weight", [c, 1, 1], 1);
    const beta = this.norm(scope, "bias", [c, 1, 1], 0);
    return L.add(L.mul(back, gamma), beta);
  }

  /** LayerNormalization over the last axis (opset 17). */
  layerNorm(x: string, c: number, scope: string, eps = 1e-5): string {
    const gamma = this.norm(scope, "weight", [c], 1);
    const beta = this.norm(scope, "bias", [c], 0);
    return this.L.g.op("LayerNormalization", [x, gamma, beta], {
      axis: { i: -1 },
      epsilon: { f: eps },
    });
  }

  /** A norm's scale (1) or shift (0). */
  norm(scope: string, param: "weight" | "bias", dims: number[], fill: number): string {
    return this.L.param({
      hint: `${scope}.${param}`,
      name: stateName(scope, param),
      dims,
      layout: "same",
      init: { fill },
    });
  }

  /** torch Linear: x·W (+ b), W stored [in, out], the MatMul named `/<scope>/MatMul`. */
  linear(x: string, din: number, dout: number, scope: string, bias = true): string {
    const { L } = this;
    const bound = 1 / Math.sqrt(din);
    this.modules.push({ scope, kind: "linear", in: din, out: dout, k: 1 });
    const w = L.param({
      hint: `${scope}.weight`,
      name: stateName(scope, "weight"),
      dims: [din, dout],
      layout: "transposed",
      init: { uniform: bound },
    });
    const y = L.g.op("MatMul", [x, w], {}, undefined, `/${scope}/MatMul`);
    if (!bias) return y;
    const b = L.param({
      hint: `${scope}.bias`,
      name: stateName(scope, "bias"),
      dims: [dout],
      layout: "same",
      init: { uniform: bound },
    });
    return L.add(y, b);
  }

  /**
   * torch Conv2d with bias (init bound 1/sqrt(fan_in)), the node named
   * `/<scope>/Conv`; "same" padding for odd kernels unless `pads` are given
   * (ONNX order: top, left, bottom, right).
   */
  conv(
    x: string,
    cin: number,
    cout: number,
    k: number,
    scope: string,
    stride = 1,
    pads?: readonly number[],
  ): string {
    const { L } = this;
    this.modules.push({ scope, kind: "conv", in: cin, out: cout, k });
    const bound = 1 / Math.sqrt(cin * k * k);
    const w = L.param({
      hint: `${scope}_w`,
      name: stateName(scope, "weight"),
      dims: [cout, cin, k, k],
      layout: "same",
      init: { uniform: bound },
    });
    const b = L.param({
      hint: `${scope}_b`,
      name: stateName(scope, "bias"),
      dims: [cout],
      layout: "same",
      init: { uniform: bound },
    });
    const p = (k - 1) >> 1;
    return L.g.op(
      "Conv",
      [x, w, b],
      {
        kernel_shape: { ints: [k, k] },
        pads: { ints: pads ?? [p, p, p, p] },
        strides: { ints: [stride, stride] },
      },
      scope,
      `/${scope}/Conv`,
    );
  }

  /** Multi-head attention (diffusers `Attention`): q from x, k/v from ctx, softmax(qkᵀ/√d)v. */
  attention(
    x: string,
    ctx: string,
    c: number,
    ctxDim: number,
    heads: number,
    scope: string,
    qkvBias = false,
  ): string {
    const { L } = this;
    const g = L.g;
    const d = c / heads;
    const split = (t: string) =>
      g.op("Transpose", [L.reshape(t, [0, 0, heads, d])], { perm: { ints: [0, 2, 1, 3] } });
    const q = split(this.linear(x, c, c, `${scope}/to_q`, qkvBias));
    const k = g.op("Transpose", [
      L.reshape(this.linear(ctx, ctxDim, c, `${scope}/to_k`, qkvBias), [0, 0, heads, d]),
    ], { perm: { ints: [0, 2, 3, 1] } });
    const v = split(this.linear(ctx, ctxDim, c, `${scope}/to_v`, qkvBias));
    const scores = L.scale(g.op("MatMul", [q, k]), 1 / Math.sqrt(d));
    const probs = g.op("Softmax", [scores], { axis: { i: -1 } });
    const o = g.op("Transpose", [g.op("MatMul", [probs, v])], { perm: { ints: [0, 2, 1, 3] } });
    return this.linear(L.reshape(o, [0, 0, c]), c, c, `${scope}/to_out.0`);
  }

  /** GELU with erf (torch's exact GELU). */
  gelu(x: string): string {
    const { L } = this;
    const erf = L.g.op("Erf", [L.scale(x, Math.SQRT1_2)]);
    return L.mul(L.scale(x, 0.5), L.shift(erf, 1));
  }

  /** NCHW → [B, HW, C]. */
  tokens(x: string, c: number): string {
    return this.L.g.op("Transpose", [this.L.reshape(x, [0, c, -1])], { perm: { ints: [0, 2, 1] } });
  }

  /** [B, HW, C] → NCHW with the spatial shape of `like`. */
  image(t: string, like: string): string {
    const g = this.L.g;
    const chw = g.op("Transpose", [t], { perm: { ints: [0, 2, 1] } });
    return g.op("Reshape", [chw, g.op("Shape", [like])]);
  }
}

/** diffusers `ResnetBlock2D`; `temb` (with its width) absent in the VAE. */
function resnet(
  B: Blocks,
  x: string,
  cin: number,
  cout: number,
  scope: string,
  eps: number,
  temb?: { v: string; dim: number },
): string {
  const { L } = B;
  let h = B.conv(
    L.silu(B.groupNorm(x, cin, eps, `${scope}/norm1`)),
    cin,
    cout,
    3,
    `${scope}/conv1`,
  );
  if (temb) {
    const t = B.linear(L.silu(temb.v), temb.dim, cout, `${scope}/time_emb_proj`);
    h = L.add(h, L.unsqueeze(t, [2, 3]));
  }
  h = B.conv(L.silu(B.groupNorm(h, cout, eps, `${scope}/norm2`)), cout, cout, 3, `${scope}/conv2`);
  const skip = cin === cout ? x : B.conv(x, cin, cout, 1, `${scope}/conv_shortcut`);
  return L.add(skip, h);
}

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

/** Builds the CLIP text encoder (int32 `input_ids`, diffusers script). */
export function buildSd15TextEncoder(
  weights: Sd15Weights,
  config: TextEncoderConfig = SD15_TEXT_ENCODER,
): Sd15Model {
  const cfg = config;
  const L = new Layers("text_encoder", weights, "float32", true);
  const B = new Blocks(L, 1);
  const g = L.g;
  const D = cfg.hiddenSize;
  const P = cfg.maxPositions;
  const ids = L.input("input_ids", "int32", ["batch", "sequence"]);
  const ids64 = g.op("Cast", [ids], { to: { i: 7 } });
  const embedding = (name: string, rows: number) =>
    L.param({ hint: name, name, dims: [rows, D], layout: "same", init: { uniform: 0.02 } });
  const tokTable = embedding("text_model.embeddings.token_embedding.weight", cfg.vocabSize);
  const tok = g.op("Gather", [tokTable, ids64], { axis: { i: 0 } });
  const seqLen = g.op("Shape", [ids], { start: { i: 1 }, end: { i: 2 } });
  const zero = g.constI64([0]);
  const posTable = embedding("text_model.embeddings.position_embedding.weight", P);
  let x = L.add(tok, g.op("Slice", [posTable, zero, seqLen, zero]));
  // Causal mask [S, S]: 0 on and below the diagonal, a large negative above it.
  const mask = new Float32Array(P * P);
  for (let i = 0; i < P; i++) for (let j = i + 1; j < P; j++) mask[i * P + j] = -1e9;
  const maskFull = g.init("causal_mask", "float32", [P, P], mask);
  const axes01 = g.constI64([0, 1]);
  const ends = g.op("Concat", [seqLen, seqLen], { axis: { i: 0 } });
  const causal = g.op("Slice", [maskFull, g.constI64([0, 0]), ends, axes01]);
  for (let l = 0; l < cfg.layers; l++) {
    const s = `text_model/encoder/layers.${l}`;
    const n1 = B.layerNorm(x, D, `${s}/layer_norm1`, cfg.layerNormEps);
    x = L.add(x, causalAttention(B, n1, causal, `${s}/self_attn`, cfg));
    const n2 = B.layerNorm(x, D, `${s}/layer_norm2`, cfg.layerNormEps);
    const f1 = B.linear(n2, D, cfg.intermediateSize, `${s}/mlp/fc1`);
    const quick = L.mul(f1, g.op("Sigmoid", [L.scale(f1, 1.702)]));
    x = L.add(x, B.linear(quick, cfg.intermediateSize, D, `${s}/mlp/fc2`));
  }
  const last = B.layerNorm(x, D, "text_model/final_layer_norm", cfg.layerNormEps);
  L.floatOut(last, "last_hidden_state", ["batch", "sequence", D]);
  // ArgMax on the int32 ids themselves: a float cast would round 49406 and 49407 together in
  // an fp16 model.
  const eos = g.op("ArgMax", [ids], { axis: { i: 1 }, keepdims: { i: 1 } });
  L.floatOut(g.op("GatherND", [last, eos], { batch_dims: { i: 1 } }), "pooler_output", [
    "batch",
    D,
  ]);
  return { graph: g, params: L.params, modules: B.modules };
}

/** CLIP self-attention (q/k/v/out with biases) plus the causal mask. */
function causalAttention(
  B: Blocks,
  x: string,
  mask: string,
  scope: string,
  cfg: TextEncoderConfig,
): string {
  const { L } = B;
  const g = L.g;
  const D = cfg.hiddenSize;
  const heads = cfg.attentionHeads;
  const d = D / heads;
  const split = (t: string, perm: number[]) =>
    g.op("Transpose", [L.reshape(t, [0, 0, heads, d])], { perm: { ints: perm } });
  const q = split(B.linear(x, D, D, `${scope}/q_proj`), [0, 2, 1, 3]);
  const k = split(B.linear(x, D, D, `${scope}/k_proj`), [0, 2, 3, 1]);
  const v = split(B.linear(x, D, D, `${scope}/v_proj`), [0, 2, 1, 3]);
  const scores = L.add(L.scale(g.op("MatMul", [q, k]), 1 / Math.sqrt(d)), mask);
  const o = g.op(
    "Transpose",
    [g.op("MatMul", [g.op("Softmax", [scores], { axis: { i: -1 } }), v])],
    {
      perm: { ints: [0, 2, 1, 3] },
    },
  );
  return B.linear(L.reshape(o, [0, 0, D]), D, D, `${scope}/out_proj`);
}

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
