/**
 * What the SD 1.x graphs share: the model a builder returns, the layer
 * vocabulary they are written in (GroupNorm, LayerNorm, Linear, Conv,
 * attention, as torch exports them) and diffusers' `ResnetBlock2D`. The
 * architectures are one file each, one definition for every use (the
 * checkpoint converter with weights from a diffusers-named map, the test and
 * bench stand-ins with seeded random weights), at any width an architecture
 * config gives (`sd15_config.ts`: the real SD 1.5, or test-sized ones):
 * the UNet and ControlNet (`sd15_unet.ts`), the CLIP text encoder
 * (`sd15_text_encoder.ts`) and the VAE (`sd15_vae.ts`). Structure and names
 * follow diffusers (`models/unets/unet_2d_condition.py`, `unet_2d_blocks.py`,
 * `resnet.py`, `attention.py`, `attention_processor.py`, `embeddings.py`,
 * `autoencoders/vae.py`) and transformers (`models/clip/modeling_clip.py`).
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
import type { Layers } from "./layers.ts";
import type { Rng } from "./rng.ts";
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
export class Blocks {
  /** The graph's layer writer. */
  readonly L: Layers;
  /** GroupNorm groups of the model (1 where it has no GroupNorm). */
  readonly groups: number;
  /** Every Linear and Conv written, in order. */
  readonly modules: Sd15Module[] = [];
  /** Writes through `L`, GroupNorms in `groups` groups. */
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
export function resnet(
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
