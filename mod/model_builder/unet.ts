/**
 * Tiny UNet and ControlNet stand-ins with the SD 1.5 contract and its spatial
 * pyramid: 12 down "skip" features + 1 mid feature at H/8, H/16, H/32, H/64
 * with the 320/640/1280 channel groups (scaled) of SD 1.5's UNet, so the
 * 13 ControlNet residuals have exactly the real shapes.
 *
 * UNet: conv_in(sample) + sinusoidal timestep embedding + projection of the
 * mean-pooled `encoder_hidden_states` (+ `timestep_cond` for LCM) → down path
 * → mid → up path that adds every skip feature back. The residual UNet adds
 * `down_block_{i}[_additional_residual]` to skip i and
 * `mid_block_additional_residual` to the mid feature, as diffusers
 * `unet_2d_condition.py` does (~L1159-1193). The plain and residual UNets built
 * from one seed share every weight, so with zero residuals they agree.
 *
 * ControlNet (the OnnxStack convention): same trunk plus a conditioning embedding of
 * `controlnet_cond` (8× downsampled), one 1×1 "zero conv" per residual, every
 * residual multiplied by `conditioning_scale` (a double), as diffusers
 * `controlnet.py` (~L781-788) does.
 *
 * @module
 */

import type { Dim, EncodedModel } from "../graph/graph.ts";
import { Layers, OPSET } from "../graph/layers.ts";
import {
  type AxisNames,
  axisNames,
  type ExportOptions,
  externalDataName,
  type ModelDims,
  timestepStyle,
} from "./options.ts";
import { Rng } from "../graph/rng.ts";

/** Spatial level (0 = H/8 … 3 = H/64) of residual i (0..11 down, 12 mid). */
export const RESIDUAL_LEVEL: readonly number[] = [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3];
/** Channel group (0 = 320, 1 = 640, 2 = 1280 at full size) of residual i. */
export const RESIDUAL_GROUP: readonly number[] = [0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 2, 2];

/** Residual naming: OnnxStack/axodox (`down_block_{i}_additional_residual`) or onnx-web. */
export type ResidualNaming = "additional_residual" | "onnx_web";

/** Channels of residual i. */
export function residualChannels(i: number, dims: ModelDims): number {
  return dims.blockChannels[RESIDUAL_GROUP[i]];
}

/** Declared shape of residual i: [batch, C, height/2^k, width/2^k] with symbolic spatial dims. */
export function residualShape(i: number, dims: ModelDims, ax: AxisNames): Dim[] {
  const k = RESIDUAL_LEVEL[i];
  const sp = (d: Dim) => (k === 0 ? d : typeof d === "number" ? d >> k : `${d}_div${2 ** k}`);
  return [ax.batch, residualChannels(i, dims), sp(ax.latentHeight), sp(ax.latentWidth)];
}

/** Input name of residual i for a residual UNet. */
export function residualInputName(i: number, naming: ResidualNaming): string {
  if (i === 12) return "mid_block_additional_residual";
  return naming === "onnx_web" ? `down_block_${i}` : `down_block_${i}_additional_residual`;
}

/**
 * Output names of an onnx-web ControlNet: `output_names` had two entries for
 * 13 outputs, so the first two get them and the rest get numeric names
 * (dakenf/diffusers.js `StableDiffusionControlNetPipeline.ts` maps
 * '24549'…'24569').
 */
export function onnxWebOutputName(i: number): string {
  if (i === 0) return "down_block_res_samples";
  if (i === 1) return "mid_block_res_sample";
  return String(24549 + 2 * (i - 2));
}

/** Options of {@link buildUnet}. */
export interface UnetOptions extends ExportOptions {
  /** Adds the 13 residual inputs (a ControlNet-UNet). */
  residuals?: ResidualNaming;
}

/**
 * Torch-export scopes (diffusers UNet2DConditionModel module paths) given to
 * some UNet/ControlNet nodes, so kohya `lora_unet_…` keys map to them (see
 * mod/lora). The tiny graph is not the real UNet; the names are chosen by role.
 */
export const UNET_SCOPES = {
  /** Linear 2·max(4, C0/2) → C0 of the timestep MLP. */
  time1: "time_embedding/linear_1",
  /** Linear C0 → C0 of the timestep MLP. */
  time2: "time_embedding/linear_2",
  /** Linear D → C0 of the text projection (a cross-attention key projection's role). */
  textProj: "down_blocks.0/attentions.0/transformer_blocks.0/attn2/to_k",
  /** Conv 3×3, 4 → C0. */
  convIn: "conv_in",
  /** Conv 3×3, C0 → C0 (the first residual block of level 0). */
  res1: "down_blocks.0/resnets.0/conv1",
  /** Conv 3×3, C2 → C2. */
  mid: "mid_block/resnets.0/conv1",
  /** Conv 3×3, C0 → 4. */
  convOut: "conv_out",
} as const;

/** Timestep input per style, as float32 values of shape [N] (N = 1 or batch). */
function timestepInput(L: Layers, o: ExportOptions, ax: AxisNames): string {
  switch (timestepStyle(o)) {
    case "float_batch":
      return L.floatIn("timestep", [ax.batch]);
    case "int64_batch":
      return L.toFloat(L.input("timestep", "int64", [ax.batch]));
    case "int64_steps":
      return L.toFloat(L.input("timestep", "int64", ["steps"]));
    case "float_scalar":
      return L.reshape(L.floatIn("timestep", []), [-1]);
  }
}

/**
 * Time + text conditioning as [N|B, C0, 1, 1] values to add to conv_in:
 * sinusoidal embedding of t (diffusers `embeddings.py` `get_timestep_embedding`,
 * flip_sin_to_cos, max period 10000) through a 2-layer MLP; mean over tokens of
 * encoder_hidden_states through a linear layer.
 */
function conditioning(L: Layers, t: string, ehs: string, dims: ModelDims): string[] {
  const c0 = dims.blockChannels[0];
  const half = Math.max(4, c0 >> 1);
  const freqs = Array.from({ length: half }, (_, i) => Math.exp(-Math.log(10000) * i / half));
  const arg = L.mul(L.unsqueeze(t, [1]), L.g.constF(freqs, [1, half]));
  const emb = L.g.op("Concat", [L.g.op("Cos", [arg]), L.g.op("Sin", [arg])], { axis: { i: 1 } });
  const t1 = L.linear(emb, 2 * half, c0, 1, "time_1", UNET_SCOPES.time1);
  const temb = L.linear(L.silu(t1), c0, c0, 1, "time_2", UNET_SCOPES.time2);
  const pooled = L.reduce("ReduceMean", ehs, [1], false); // [B,D]
  const text = L.linear(pooled, dims.hiddenSize, c0, 2, "text_proj", UNET_SCOPES.textProj);
  return [L.unsqueeze(temb, [2, 3]), L.unsqueeze(text, [2, 3])];
}

/** The down path: 12 skip features and the mid feature (index 12). */
function downPath(L: Layers, h0: string, dims: ModelDims): string[] {
  const f = [h0];
  for (let i = 1; i < 12; i++) {
    const prev = f[i - 1];
    const cin = residualChannels(i - 1, dims);
    const cout = residualChannels(i, dims);
    if (RESIDUAL_LEVEL[i] !== RESIDUAL_LEVEL[i - 1]) {
      f.push(L.conv(prev, cin, cout, 3, { stride: 2, hint: `down_${i}` }));
    } else {
      const scope = i === 1 ? UNET_SCOPES.res1 : undefined;
      const x = L.conv(L.silu(prev), cin, cout, 3, { hint: `res_${i}`, scope });
      f.push(cin === cout ? L.add(prev, x) : x);
    }
  }
  const c2 = dims.blockChannels[2];
  f.push(L.add(f[11], L.conv(L.silu(f[11]), c2, c2, 3, { hint: "mid", scope: UNET_SCOPES.mid })));
  return f;
}

/** The up path of the UNet: every skip feature s[0..11] and the mid s[12] reach the output. */
function upPath(L: Layers, s: string[], dims: ModelDims): string {
  const [c0, c1, c2] = dims.blockChannels;
  let u = L.sum([s[12], s[9], s[10], s[11]]);
  u = L.resizeTo(L.conv(L.silu(u), c2, c2, 3, { hint: "up_3" }), s[8]);
  u = L.sum([u, s[7], s[8]]);
  u = L.resizeTo(L.add(L.conv(L.silu(u), c2, c1, 3, { hint: "up_2" }), s[6]), s[5]);
  u = L.sum([u, s[4], s[5]]);
  u = L.resizeTo(L.add(L.conv(L.silu(u), c1, c0, 3, { hint: "up_1" }), s[3]), s[2]);
  u = L.sum([u, s[0], s[1], s[2]]);
  return L.conv(L.silu(u), c0, 4, 3, { hint: "conv_out", scope: UNET_SCOPES.convOut });
}

/** Builds a UNet (`residuals` set: the ControlNet-UNet). Weights go to external data. */
export function buildUnet(seed: number, dims: ModelDims, o: UnetOptions): EncodedModel {
  const L = new Layers("unet", new Rng(seed, "unet"), o.io);
  const ax = axisNames(o.flavour);
  const h = ax.latentHeight;
  const w = ax.latentWidth;
  const sample = L.floatIn("sample", [ax.batch, ax.sampleChannels, h, w]);
  const t = timestepInput(L, o, ax);
  const ehs = L.floatIn("encoder_hidden_states", [ax.batch, ax.sequence, dims.hiddenSize]);
  const cond = conditioning(L, t, ehs, dims);
  if (o.timestepCond) {
    const tc = L.floatIn("timestep_cond", [ax.batch, dims.timeCondDim]);
    cond.push(L.unsqueeze(L.linear(tc, dims.timeCondDim, dims.blockChannels[0], 1, "cond_proj"), [
      2,
      3,
    ]));
  }
  const convIn = L.conv(sample, 4, dims.blockChannels[0], 3, {
    hint: "conv_in",
    scope: UNET_SCOPES.convIn,
  });
  const h0 = L.sum([convIn, ...cond]);
  const f = downPath(L, h0, dims);
  const skips = o.residuals
    ? f.map((x, i) =>
      L.add(x, L.floatIn(residualInputName(i, o.residuals!), residualShape(i, dims, ax)))
    )
    : f;
  L.floatOut(upPath(L, skips, dims), "out_sample", [ax.batch, 4, h, w]);
  return L.g.encode({
    opset: OPSET,
    externalData: { location: externalDataName(o.flavour), minBytes: 64 },
    docString: "tiny SD 1.5 UNet (test fixture)",
  });
}

/** Options of {@link buildControlNet}. */
export interface ControlNetOptions extends ExportOptions {
  /** Random stream name, e.g. "controlnet_depth": different ControlNets get different weights. */
  stream: string;
  /** Output names: OnnxStack (default) or onnx-web's positional names. */
  naming?: ResidualNaming;
  /** Adds the `conditioning_scale` double input (default true; onnx-web has none). */
  conditioningScale?: boolean;
}

/** Builds a ControlNet (separate model, 13 residual outputs). */
export function buildControlNet(
  seed: number,
  dims: ModelDims,
  o: ControlNetOptions,
): EncodedModel {
  const L = new Layers("controlnet", new Rng(seed, o.stream), o.io);
  const ax = axisNames(o.flavour);
  const c0 = dims.blockChannels[0];
  const sample = L.floatIn("sample", [ax.batch, 4, ax.latentHeight, ax.latentWidth]);
  const t = timestepInput(L, { ...o, timestep: o.timestep ?? "float_batch" }, ax);
  const ehs = L.floatIn("encoder_hidden_states", [ax.batch, ax.sequence, dims.hiddenSize]);
  const image = L.floatIn("controlnet_cond", [ax.batch, 3, ax.imageHeight, ax.imageWidth]);
  const withScale = o.conditioningScale ?? true;
  const scale = withScale ? L.toFloat(L.input("conditioning_scale", "float64", [1])) : undefined;

  const pooled = L.g.op("AveragePool", [image], {
    kernel_shape: { ints: [8, 8] },
    strides: { ints: [8, 8] },
  });
  const condEmb = L.conv(L.silu(L.conv(pooled, 3, c0, 3, { gain: 2, hint: "cond_1" })), c0, c0, 3, {
    hint: "cond_2",
  });
  const h0 = L.sum([
    L.conv(sample, 4, c0, 3, { hint: "conv_in" }),
    ...conditioning(L, t, ehs, dims),
    condEmb,
  ]);
  const f = downPath(L, h0, dims);
  f.forEach((x, i) => {
    const c = residualChannels(i, dims);
    let r = L.conv(x, c, c, 1, { hint: `zero_conv_${i}` });
    if (scale) r = L.mul(r, scale);
    const name = o.naming === "onnx_web"
      ? (i === 12 ? String(24569) : onnxWebOutputName(i))
      : residualInputName(i, "additional_residual");
    L.floatOut(r, name, residualShape(i, dims, ax));
  });
  return L.g.encode({
    opset: OPSET,
    docString: `tiny SD 1.5 ControlNet ${o.stream} (test fixture)`,
  });
}
