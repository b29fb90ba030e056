/**
 * Full-size SD 1.5 graphs for benchmarks: the real operator structure and
 * widths with random weights from a seed (the diffusers script's I/O, diffusers
 * `UNet2DConditionModel`, `CLIPTextModel`, `AutoencoderKL` decoder):
 *
 * - UNet: conv_in 4→320, sinusoidal time embedding → 1280 MLP, down blocks
 *   320/640/1280/1280 of ResNet (GroupNorm 32, SiLU, 3×3 convs, time
 *   projection, 1×1 shortcut) and Transformer2D (GroupNorm, 1×1 proj_in,
 *   LayerNorm + self-attention, LayerNorm + cross-attention on the text,
 *   LayerNorm + GEGLU feed-forward, proj_out; 8 heads) with stride-2
 *   downsampling, the mid block (ResNet, Transformer, ResNet), up blocks with
 *   skip concatenation and nearest ×2 upsampling, GroupNorm, SiLU, conv_out.
 *   At `layersPerBlock` 2 it has exactly the real 859,520,964 parameters.
 * - Text encoder: CLIP ViT-L/14 text model, 12 layers × 768 (causal
 *   self-attention, quick-GELU MLP), token and position embeddings;
 *   123,060,480 parameters, as the real one.
 * - VAE decoder: post_quant_conv, conv_in 4→512, mid (ResNet, single-head
 *   attention, ResNet), up blocks 512/512/256/128 of 3 ResNets with
 *   upsampling, GroupNorm, SiLU, conv_out; 49,490,199 parameters (the real
 *   decoder half of the 83,653,863-parameter VAE).
 * - VAE encoder: conv_in 3→128, down blocks 128/256/512/512 of 2 ResNets with
 *   stride-2 downsampling (not after the last), mid (ResNet, single-head
 *   attention, ResNet), GroupNorm, SiLU, conv_out → 8, quant_conv, then the
 *   latent sampled in the graph as the diffusers script exports
 *   `encode(x)[0].sample()` (RandomNormalLike); 34,163,664 parameters, the
 *   other half of the VAE.
 *
 * Node names carry the diffusers module scopes (`/down_blocks.0/resnets.0/conv1/Conv`),
 * so kohya and PEFT LoRA keys of a real SD 1.5 LoRA match them (mod/lora).
 * Weights are lazy (`Layers.lazy`): {@link Graph.writeFiles} makes and writes
 * one tensor at a time. I/O follows the diffusers script: int32 `input_ids`,
 * float `timestep [batch]`, external data `weights.pb` (UNet) or
 * `model.onnx_data` (the others, when written with external data).
 *
 * @module
 */

import type { Graph } from "./graph.ts";
import type { TinyLoraModule } from "./lora.ts";
import { Layers } from "./layers.ts";
import { Rng } from "./rng.ts";
import { sampleInGraph } from "./vae.ts";

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
   * the OnnxStack/axodox ControlNet-enabled UNet), added to
   * the skip connections and the mid block as diffusers `UNet2DConditionModel`
   * does with `down_block_additional_residuals`.
   */
  residuals?: boolean;
}

/** A full-size graph ready to write, with its parameter count. */
export interface FullModel {
  /** The graph; write it with `graph.writeFiles`. */
  graph: Graph;
  /** Trainable parameters. */
  params: number;
  /** Its Linear and Conv modules (for LoRAs shaped like real ones). */
  modules: FullModule[];
}

const GN_GROUPS = 32;

/** A torch Linear or Conv2d of a full-size graph, by its module path (what a LoRA adapts). */
export interface FullModule {
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

/** The shared layer vocabulary of the full-size graphs. */
class Blocks {
  readonly L: Layers;
  /** Every Linear and Conv written, in order. */
  readonly modules: FullModule[] = [];
  constructor(L: Layers) {
    this.L = L;
  }

  /** torch GroupNorm as torch exports it: Reshape → InstanceNormalization → Reshape → affine. */
  groupNorm(x: string, c: number, eps: number, scope: string): string {
    const { L } = this;
    const g = L.g;
    const r = L.reshape(x, [0, GN_GROUPS, -1]);
    const ones = g.init("gn_one", "float32", [GN_GROUPS], new Float32Array(GN_GROUPS).fill(1));
    const zeros = g.init("gn_zero", "float32", [GN_GROUPS], new Float32Array(GN_GROUPS));
    const n = g.op("InstanceNormalization", [r, ones, zeros], { epsilon: { f: eps } });
    const back = g.op("Reshape", [n, g.op("Shape", [x])]);
    const gamma = L.constParam(`${scope}.weight`, [c, 1, 1], 1);
    const beta = L.constParam(`${scope}.bias`, [c, 1, 1], 0);
    return L.add(L.mul(back, gamma), beta);
  }

  /** LayerNormalization over the last axis (opset 17). */
  layerNorm(x: string, c: number, scope: string, eps = 1e-5): string {
    const { L } = this;
    const gamma = L.constParam(`${scope}.weight`, [c], 1);
    const beta = L.constParam(`${scope}.bias`, [c], 0);
    return L.g.op("LayerNormalization", [x, gamma, beta], {
      axis: { i: -1 },
      epsilon: { f: eps },
    });
  }

  /** torch Linear: x·W (+ b), W stored [in, out], the MatMul named `/<scope>/MatMul`. */
  linear(x: string, din: number, dout: number, scope: string, bias = true): string {
    const { L } = this;
    const bound = 1 / Math.sqrt(din);
    this.modules.push({ scope, kind: "linear", in: din, out: dout, k: 1 });
    const w = L.weight(`${scope}.weight`, [din, dout], bound);
    const y = L.g.op("MatMul", [x, w], {}, undefined, `/${scope}/MatMul`);
    return bias ? L.add(y, L.weight(`${scope}.bias`, [dout], bound)) : y;
  }

  conv(x: string, cin: number, cout: number, k: number, scope: string, stride = 1): string {
    this.modules.push({ scope, kind: "conv", in: cin, out: cout, k });
    return this.L.conv(x, cin, cout, k, { stride, hint: scope, scope });
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

/** diffusers `ResnetBlock2D`; `temb` absent in the VAE. */
function resnet(
  B: Blocks,
  x: string,
  cin: number,
  cout: number,
  scope: string,
  eps: number,
  temb?: string,
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
    const t = B.linear(L.silu(temb), 1280, cout, `${scope}/time_emb_proj`);
    h = L.add(h, L.unsqueeze(t, [2, 3]));
  }
  h = B.conv(L.silu(B.groupNorm(h, cout, eps, `${scope}/norm2`)), cout, cout, 3, `${scope}/conv2`);
  const skip = cin === cout ? x : B.conv(x, cin, cout, 1, `${scope}/conv_shortcut`);
  return L.add(skip, h);
}

/** diffusers `Transformer2DModel` with one `BasicTransformerBlock` (SD 1.5, 1×1 conv proj_in/out). */
function transformer(B: Blocks, x: string, c: number, ctx: string, scope: string): string {
  const { L } = B;
  const heads = 8;
  const h0 = B.conv(B.groupNorm(x, c, 1e-6, `${scope}/norm`), c, c, 1, `${scope}/proj_in`);
  let t = B.tokens(h0, c);
  const blk = `${scope}/transformer_blocks.0`;
  let n = B.layerNorm(t, c, `${blk}/norm1`);
  t = L.add(t, B.attention(n, n, c, c, heads, `${blk}/attn1`));
  n = B.layerNorm(t, c, `${blk}/norm2`);
  t = L.add(t, B.attention(n, ctx, c, 768, heads, `${blk}/attn2`));
  n = B.layerNorm(t, c, `${blk}/norm3`);
  const proj = B.linear(n, c, 8 * c, `${blk}/ff/net.0/proj`);
  const [a, gate] = L.g.opN("Split", [proj, L.g.constI64([4 * c, 4 * c])], 2, { axis: { i: -1 } });
  t = L.add(t, B.linear(L.mul(a, B.gelu(gate)), 4 * c, c, `${blk}/ff/net.2`));
  const h = B.conv(B.image(t, h0), c, c, 1, `${scope}/proj_out`);
  return L.add(h, x);
}

/** Sinusoidal timestep embedding through the 320 → 1280 → 1280 MLP (`time_embedding`). */
function timeEmbedding(B: Blocks, t: string): string {
  const { L } = B;
  const g = L.g;
  // Timesteps (diffusers `get_timestep_embedding`, flip_sin_to_cos, shift 0): [cos, sin].
  const half = 160;
  const freqs = Array.from({ length: half }, (_, i) => Math.exp(-Math.log(10000) * i / half));
  const arg = L.mul(L.unsqueeze(t, [1]), g.constF(freqs, [1, half]));
  const emb = g.op("Concat", [g.op("Cos", [arg]), g.op("Sin", [arg])], { axis: { i: 1 } });
  return B.linear(
    L.silu(B.linear(emb, 320, 1280, "time_embedding/linear_1")),
    1280,
    1280,
    "time_embedding/linear_2",
  );
}

const WIDTHS = [320, 640, 1280, 1280];

/**
 * The down blocks and the mid block (shared by the UNet and the ControlNet):
 * returns the 12 skip tensors (conv_in, each ResNet/Transformer pair, each
 * downsampler) and the mid block's output.
 */
function downAndMid(
  B: Blocks,
  h0: string,
  temb: string,
  ctx: string,
  lpb: number,
): { skips: Array<{ v: string; c: number }>; mid: string } {
  const eps = 1e-5;
  let h = h0;
  let c = 320;
  const skips: Array<{ v: string; c: number }> = [{ v: h, c }];
  WIDTHS.forEach((w, i) => {
    for (let j = 0; j < lpb; j++) {
      h = resnet(B, h, c, w, `down_blocks.${i}/resnets.${j}`, eps, temb);
      c = w;
      if (i < 3) h = transformer(B, h, c, ctx, `down_blocks.${i}/attentions.${j}`);
      skips.push({ v: h, c });
    }
    if (i < 3) {
      h = B.conv(h, c, c, 3, `down_blocks.${i}/downsamplers.0/conv`, 2);
      skips.push({ v: h, c });
    }
  });
  h = resnet(B, h, c, c, "mid_block/resnets.0", eps, temb);
  h = transformer(B, h, c, ctx, "mid_block/attentions.0");
  h = resnet(B, h, c, c, "mid_block/resnets.1", eps, temb);
  return { skips, mid: h };
}

/** The residual's name (OnnxStack naming): `down_block_<i>_additional_residual`, 12 = mid. */
function residualName(i: number): string {
  return i === 12 ? "mid_block_additional_residual" : `down_block_${i}_additional_residual`;
}

/** Builds the full-size UNet (diffusers-script I/O, fp32 graph; write fp16 with `float16`). */
export function buildFullUnet(seed: number, options: FullOptions = {}): FullModel {
  const lpb = options.layersPerBlock ?? 2;
  // The residual UNet is another model file with its own weights: its own stream.
  const L = new Layers(
    "unet",
    new Rng(seed, options.residuals ? "full/controlnet_unet" : "full/unet"),
    "float32",
    true,
  );
  const B = new Blocks(L);
  const g = L.g;
  const sample = L.floatIn("sample", ["batch", "channels", "height", "width"]);
  const t = L.floatIn("timestep", ["batch"]);
  const ctx = L.floatIn("encoder_hidden_states", ["batch", "sequence", 768]);
  const eps = 1e-5;
  const temb = timeEmbedding(B, t);
  const down = downAndMid(B, B.conv(sample, 4, 320, 3, "conv_in"), temb, ctx, lpb);
  const skips = down.skips;
  let h = down.mid;
  if (options.residuals) {
    // diffusers: down_block_res_samples[i] + down_block_additional_residuals[i]; mid + mid residual.
    skips.forEach((s, i) => {
      s.v = L.add(s.v, L.floatIn(residualName(i), ["batch", s.c, `res_h${i}`, `res_w${i}`]));
    });
    h = L.add(h, L.floatIn(residualName(12), ["batch", 1280, "res_h12", "res_w12"]));
  }
  let c = 1280;
  [...WIDTHS].reverse().forEach((w, i) => {
    for (let j = 0; j <= lpb; j++) {
      const skip = skips.pop()!;
      const cat = g.op("Concat", [h, skip.v], { axis: { i: 1 } });
      h = resnet(B, cat, c + skip.c, w, `up_blocks.${i}/resnets.${j}`, eps, temb);
      c = w;
      if (i > 0) h = transformer(B, h, c, ctx, `up_blocks.${i}/attentions.${j}`);
    }
    if (i < 3) {
      h = B.conv(L.resizeTo(h, skips.at(-1)!.v), c, c, 3, `up_blocks.${i}/upsamplers.0/conv`);
    }
  });
  const out = B.conv(L.silu(B.groupNorm(h, 320, eps, "conv_norm_out")), 320, 4, 3, "conv_out");
  L.floatOut(out, "out_sample", ["batch", 4, "height", "width"]);
  return { graph: g, params: L.params, modules: B.modules };
}

/**
 * Builds a full-size ControlNet (diffusers `ControlNetModel` for SD 1.5):
 * the UNet's time embedding, conv_in, down and mid blocks, plus
 * `controlnet_cond_embedding` (conv 3→16, six SiLU convs 16/32/96/256 with
 * three stride-2 steps, conv_out → 320, added after conv_in) and one 1×1
 * "zero conv" per residual (`controlnet_down_blocks.{0..11}`,
 * `controlnet_mid_block`). I/O as OnnxStack's export (`OnnxStack.Converter/ControlNet/models.py`):
 * `sample`, `timestep`, `encoder_hidden_states`, `controlnet_cond`
 * `[B, 3, 8h, 8w]`, `conditioning_scale` double `[1]` → the 13 residuals.
 */
export function buildFullControlNet(seed: number, stream = "depth"): FullModel {
  const L = new Layers("controlnet", new Rng(seed, `full/controlnet_${stream}`), "float32", true);
  const B = new Blocks(L);
  const sample = L.floatIn("sample", ["batch", 4, "height", "width"]);
  const t = L.floatIn("timestep", ["batch"]);
  const ctx = L.floatIn("encoder_hidden_states", ["batch", "sequence", 768]);
  const cond = L.floatIn("controlnet_cond", ["batch", 3, "image_height", "image_width"]);
  const scale = L.toFloat(L.input("conditioning_scale", "float64", [1]));
  const temb = timeEmbedding(B, t);
  // controlnet_cond_embedding (diffusers `ControlNetConditioningEmbedding`, channels 16/32/96/256).
  const ce = "controlnet_cond_embedding";
  let e = L.silu(B.conv(cond, 3, 16, 3, `${ce}/conv_in`));
  const chans = [16, 32, 96, 256];
  for (let i = 0; i < 3; i++) {
    e = L.silu(B.conv(e, chans[i], chans[i], 3, `${ce}/blocks.${2 * i}`));
    e = L.silu(B.conv(e, chans[i], chans[i + 1], 3, `${ce}/blocks.${2 * i + 1}`, 2));
  }
  e = B.conv(e, 256, 320, 3, `${ce}/conv_out`);
  const h0 = L.add(B.conv(sample, 4, 320, 3, "conv_in"), e);
  const { skips, mid } = downAndMid(B, h0, temb, ctx, 2);
  skips.forEach((s, i) => {
    const r = L.mul(B.conv(s.v, s.c, s.c, 1, `controlnet_down_blocks.${i}`), scale);
    L.floatOut(r, residualName(i), ["batch", s.c, `res_h${i}`, `res_w${i}`]);
  });
  const m = L.mul(B.conv(mid, 1280, 1280, 1, "controlnet_mid_block"), scale);
  L.floatOut(m, residualName(12), ["batch", 1280, "res_h12", "res_w12"]);
  return { graph: L.g, params: L.params, modules: B.modules };
}

/** Builds the full-size CLIP text encoder (int32 `input_ids`, diffusers script). */
export function buildFullTextEncoder(seed: number): FullModel {
  const L = new Layers("text_encoder", new Rng(seed, "full/text_encoder"), "float32", true);
  const B = new Blocks(L);
  const g = L.g;
  const D = 768;
  const ids = L.input("input_ids", "int32", ["batch", "sequence"]);
  const ids64 = g.op("Cast", [ids], { to: { i: 7 } });
  const tokTable = L.weight("text_model.embeddings.token_embedding.weight", [49408, D], 0.02);
  const tok = g.op("Gather", [tokTable, ids64], { axis: { i: 0 } });
  const seqLen = g.op("Shape", [ids], { start: { i: 1 }, end: { i: 2 } });
  const zero = g.constI64([0]);
  const posTable = L.weight("text_model.embeddings.position_embedding.weight", [77, D], 0.02);
  let x = L.add(tok, g.op("Slice", [posTable, zero, seqLen, zero]));
  // Causal mask [S, S]: 0 on and below the diagonal, a large negative above it.
  const mask = new Float32Array(77 * 77);
  for (let i = 0; i < 77; i++) for (let j = i + 1; j < 77; j++) mask[i * 77 + j] = -1e9;
  const maskFull = g.init("causal_mask", "float32", [77, 77], mask);
  const axes01 = g.constI64([0, 1]);
  const ends = g.op("Concat", [seqLen, seqLen], { axis: { i: 0 } });
  const causal = g.op("Slice", [maskFull, g.constI64([0, 0]), ends, axes01]);
  for (let l = 0; l < 12; l++) {
    const s = `text_model/encoder/layers.${l}`;
    const n1 = B.layerNorm(x, D, `${s}/layer_norm1`);
    x = L.add(x, causalAttention(B, n1, causal, `${s}/self_attn`));
    const n2 = B.layerNorm(x, D, `${s}/layer_norm2`);
    const f1 = B.linear(n2, D, 3072, `${s}/mlp/fc1`);
    const quick = L.mul(f1, g.op("Sigmoid", [L.scale(f1, 1.702)]));
    x = L.add(x, B.linear(quick, 3072, D, `${s}/mlp/fc2`));
  }
  const last = B.layerNorm(x, D, "text_model/final_layer_norm");
  L.floatOut(last, "last_hidden_state", ["batch", "sequence", D]);
  const eos = g.op("ArgMax", [L.toFloat(ids)], { axis: { i: 1 }, keepdims: { i: 1 } });
  L.floatOut(g.op("GatherND", [last, eos], { batch_dims: { i: 1 } }), "pooler_output", [
    "batch",
    D,
  ]);
  return { graph: g, params: L.params, modules: B.modules };
}

/** CLIP self-attention (q/k/v/out with biases, 12 heads) plus the causal mask. */
function causalAttention(B: Blocks, x: string, mask: string, scope: string): string {
  const { L } = B;
  const g = L.g;
  const D = 768;
  const heads = 12;
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

/** Builds the full-size VAE decoder (`latent_sample` → `sample`, diffusers script names). */
export function buildFullVaeDecoder(seed: number): FullModel {
  const L = new Layers("vae_decoder", new Rng(seed, "full/vae_decoder"), "float32", true);
  const B = new Blocks(L);
  const g = L.g;
  const eps = 1e-6;
  const z = L.floatIn("latent_sample", ["batch", "channels", "height", "width"]);
  let h = B.conv(B.conv(z, 4, 4, 1, "post_quant_conv"), 4, 512, 3, "decoder/conv_in");
  h = resnet(B, h, 512, 512, "decoder/mid_block/resnets.0", eps);
  // Single-head attention over the 64×64 positions (diffusers `Attention`, with biases).
  const a = B.tokens(B.groupNorm(h, 512, eps, "decoder/mid_block/attentions.0/group_norm"), 512);
  const att = B.attention(a, a, 512, 512, 1, "decoder/mid_block/attentions.0", true);
  h = L.add(h, B.image(att, h));
  h = resnet(B, h, 512, 512, "decoder/mid_block/resnets.1", eps);
  let c = 512;
  [512, 512, 256, 128].forEach((w, i) => {
    for (let j = 0; j < 3; j++) {
      h = resnet(B, h, c, w, `decoder/up_blocks.${i}/resnets.${j}`, eps);
      c = w;
    }
    if (i < 3) {
      h = B.conv(L.upscale(h, 2, "nearest"), c, c, 3, `decoder/up_blocks.${i}/upsamplers.0/conv`);
    }
  });
  const out = B.conv(
    L.silu(B.groupNorm(h, 128, eps, "decoder/conv_norm_out")),
    128,
    3,
    3,
    "decoder/conv_out",
  );
  L.floatOut(out, "sample", ["batch", 3, "image_height", "image_width"]);
  return { graph: g, params: L.params, modules: B.modules };
}

/**
 * Builds the full-size VAE encoder (`sample` → `latent_sample` drawn in the
 * graph, diffusers script names and I/O).
 */
export function buildFullVaeEncoder(seed: number): FullModel {
  const L = new Layers("vae_encoder", new Rng(seed, "full/vae_encoder"), "float32", true);
  const B = new Blocks(L);
  const eps = 1e-6;
  const x = L.floatIn("sample", ["batch", "channels", "height", "width"]);
  let h = B.conv(x, 3, 128, 3, "encoder/conv_in");
  let c = 128;
  [128, 256, 512, 512].forEach((w, i) => {
    for (let j = 0; j < 2; j++) {
      h = resnet(B, h, c, w, `encoder/down_blocks.${i}/resnets.${j}`, eps);
      c = w;
    }
    // Downsample2D pads (0, 1, 0, 1) and convolves with stride 2: the same output size
    // and cost as this padded stride-2 conv.
    if (i < 3) h = B.conv(h, c, c, 3, `encoder/down_blocks.${i}/downsamplers.0/conv`, 2);
  });
  h = resnet(B, h, 512, 512, "encoder/mid_block/resnets.0", eps);
  const a = B.tokens(B.groupNorm(h, 512, eps, "encoder/mid_block/attentions.0/group_norm"), 512);
  const att = B.attention(a, a, 512, 512, 1, "encoder/mid_block/attentions.0", true);
  h = L.add(h, B.image(att, h));
  h = resnet(B, h, 512, 512, "encoder/mid_block/resnets.1", eps);
  h = B.conv(
    L.silu(B.groupNorm(h, 512, eps, "encoder/conv_norm_out")),
    512,
    8,
    3,
    "encoder/conv_out",
  );
  const params = B.conv(h, 8, 8, 1, "quant_conv");
  L.floatOut(sampleInGraph(L, params, "diffusers"), "latent_sample", [
    "batch",
    4,
    "latent_height",
    "latent_width",
  ]);
  return { graph: L.g, params: L.params, modules: B.modules };
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
