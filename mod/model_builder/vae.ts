/**
 * Tiny VAE decoder and encoder with the SD 1.5 contract and its 8× latent
 * ratio (sd15-onnx.md §1a, §1b).
 *
 * Decoder: `latent_sample [B,4,h,w]` → conv → SiLU → Resize ×8 → conv → tanh →
 * `sample [B,3,8h,8w]` in [-1, 1].
 * Encoder: `sample [B,3,H,W]` → AveragePool 8×8 → conv → SiLU → conv →
 * `latent_sample [B,4,H/8,W/8]` (diffusers script, Optimum ≤1.22) or
 * `latent_parameters [B,8,H/8,W/8]` = mean ‖ logvar (Optimum ≥1.23). The real
 * exports sample inside the graph; this one is deterministic (no RandomNormal).
 *
 * @module
 */

import type { EncodedModel } from "./graph.ts";
import { Layers, OPSET } from "./layers.ts";
import { axisNames, type ExportOptions, type ModelDims } from "./options.ts";
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

/** Builds the VAE encoder (output per flavour: latent_sample or latent_parameters). */
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
  if (o.flavour === "diffusers") {
    L.floatOut(L.conv(x, C, 4, 3, { hint: "conv_out" }), "latent_sample", [
      ax.batch,
      4,
      outH,
      outW,
    ]);
  } else {
    const bias = Array.from({ length: 8 }, (_, i) => (i < 4 ? 0 : LOGVAR_BIAS));
    const params = L.conv(x, C, 8, 3, { bias, hint: "conv_out" });
    L.floatOut(params, "latent_parameters", [ax.batch, 8, outH, outW]);
  }
  return L.g.encode({ opset: OPSET, docString: "tiny SD 1.5 VAE encoder (test fixture)" });
}
