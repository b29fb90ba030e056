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

import type { EncodedModel } from "../graph/graph.ts";
import { Layers, OPSET } from "../graph/layers.ts";
import { axisNames, type ExportOptions, type ModelDims, vaeEncoderOutput } from "./options.ts";
import { Rng } from "../graph/rng.ts";
import { sampleInGraph } from "../graph/sd15.ts";

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
    L.floatOut(sampleInGraph(L, params, o.flavour !== "diffusers"), "latent_sample", [
      ax.batch,
      4,
      outH,
      outW,
    ]);
  }
  return L.g.encode({ opset: OPSET, docString: "tiny SD 1.5 VAE encoder (test fixture)" });
}
