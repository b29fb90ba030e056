/**
 * Tiny VAE decoder and encoder with the SD 1.5 contract and its 8× latent
 * ratio (diffusers script, Optimum).
 *
 * Decoder: `latent_sample [B,4,h,w]` → conv → SiLU → Resize ×8 → conv → tanh →
 * `sample [B,3,8h,8w]` in [-1, 1].
 * Encoder: `sample [B,3,H,W]` → AveragePool 8×8 → conv → SiLU → conv → the
 * distribution parameters `[B,8,H/8,W/8]` (mean ‖ logvar), returned as
 * `latent_parameters` (Optimum ≥ 1.23) or sampled inside the graph into
 * `latent_sample [B,4,H/8,W/8]` the way `torch.onnx.export` traces
 * diffusers' `DiagonalGaussianDistribution.sample()` (the diffusers script,
 * Optimum ≤ 1.22): chunk → clamp(logvar, -30, 20) → exp(0.5·logvar) →
 * `mean + std · RandomNormalLike(ConstantOfShape(Shape(mean)))`, so a fixed
 * seed does not fix its output, as with the real exports.
 *
 * @module
 */

import type { EncodedModel } from "./graph.ts";
import { Layers, OPSET } from "./layers.ts";
import {
  axisNames,
  type ExportOptions,
  type Flavour,
  type ModelDims,
  vaeEncoderOutput,
} from "./options.ts";
import { Rng } from "./rng.ts";

/** Log-variance bias of `latent_parameters`: std = exp(0.5·(-4)) ≈ 0.135. */
export const LOGVAR_BIAS: number = -4;

/** Builds the VAE decoder. */
export function buildVaeDecoder(seed: number, dims: ModelDims, o: ExportOptions): EncodedModel {
  const L = new Layers("vae_decoder", new Rng(seed, "vae_decoder"), o.io);
  const ax = axisNames(o.flavour);
  const C = dims.vaeChannels;
  const channels = o.flavour === "diffusers" ? "channels" : 4;
  const z = L.floatIn("latent_sample", [ax.batch, channels, ax.latentHeight, ax.latentWidth]);
  const x = L.upscale(
    L.silu(L.conv(z, 4, C, 3, { gain: 2, hint: "conv_in" })),
    8,
    o.upsample ?? "nearest",
  );
  const img = L.g.op("Tanh", [L.conv(x, C, 3, 3, { gain: 2, hint: "conv_out" })]);
  const out = o.flavour === "diffusers" ? ["image_height", "image_width"] : ["height", "width"];
  L.floatOut(img, "sample", [ax.batch, 3, ...out]);
  return L.g.encode({ opset: OPSET, docString: "tiny SD 1.5 VAE decoder (test fixture)" });
}

/**
 * Builds the VAE encoder (output per {@link vaeEncoderOutput}: `latent_sample`
 * sampled in the graph, or `latent_parameters`). The weights depend on the
 * seed only, so every output style of one seed has the same parameters.
 */
export function buildVaeEncoder(seed: number, dims: ModelDims, o: ExportOptions): EncodedModel {
  const L = new Layers("vae_encoder", new Rng(seed, "vae_encoder"), o.io);
  const ax = axisNames(o.flavour);
  const C = dims.vaeChannels;
  const channels = o.flavour === "diffusers" ? "channels" : 3;
  const img = L.floatIn("sample", [ax.batch, channels, ax.imageHeight, ax.imageWidth]);
  const pooled = L.g.op("AveragePool", [img], {
    kernel_shape: { ints: [8, 8] },
    strides: { ints: [8, 8] },
  });
  const x = L.silu(L.conv(pooled, 3, C, 3, { gain: 2, hint: "conv_in" }));
  const outH = o.flavour === "diffusers" ? "latent_height" : "height";
  const outW = o.flavour === "diffusers" ? "latent_width" : "width";
  const bias = Array.from({ length: 8 }, (_, i) => (i < 4 ? 0 : LOGVAR_BIAS));
  const params = L.conv(x, C, 8, 3, { bias, hint: "conv_out" });
  if (vaeEncoderOutput(o) === "latent_parameters") {
    L.floatOut(params, "latent_parameters", [ax.batch, 8, outH, outW]);
  } else {
    L.floatOut(sampleInGraph(L, params, o.flavour), "latent_sample", [ax.batch, 4, outH, outW]);
  }
  return L.g.encode({ opset: OPSET, docString: "tiny SD 1.5 VAE encoder (test fixture)" });
}

/**
 * `DiagonalGaussianDistribution(params).sample()` as the torch exporter
 * writes it (diffusers `models/autoencoders/vae.py`): `torch.chunk(params, 2,
 * dim=1)` as `prim::ConstantChunk` at opset ≥ 13 (two Slices whose bounds come
 * from the runtime shape) for the diffusers flavour and as one Split for the
 * Optimum one; `torch.clamp(logvar, -30, 20)` as Clip; `torch.exp(0.5 ·
 * logvar)`; `randn` of the traced mean shape as RandomNormalLike over
 * ConstantOfShape(Shape(mean)), followed by the `.to(dtype)` Cast of
 * diffusers 0.6's `sample()` in the diffusers flavour; `mean + std · noise`.
 */
export function sampleInGraph(L: Layers, params: string, flavour: Flavour): string {
  const g = L.g;
  let mean: string;
  let logvar: string;
  if (flavour === "diffusers") {
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
  if (flavour === "diffusers") noise = g.op("Cast", [noise], { to: { i: 1 } }, "noise_f32");
  return L.add(mean, L.mul(std, noise));
}
