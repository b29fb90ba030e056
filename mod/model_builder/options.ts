/**
 * Options shared by the model builders: sizes (tiny for tests, or the real SD
 * 1.5 widths for benchmark-shaped graphs) and the export flavour, which fixes
 * names, dtypes and dynamic-axis names the way each exporter writes them
 * (the diffusers script and Optimum, docs/models.md "Export flavours").
 *
 * @module
 */

import type { Dim } from "../graph/graph.ts";
import type { IoFloat } from "../graph/layers.ts";

/** Channel widths of the models. */
export interface ModelDims {
  /** UNet/ControlNet block channels (SD 1.5: 320, 640, 1280). */
  blockChannels: readonly [number, number, number];
  /** CLIP text hidden size (SD 1.5: 768). */
  hiddenSize: number;
  /** VAE internal channels (any; the real VAE uses 128..512). */
  vaeChannels: number;
  /** LCM `time_cond_proj_dim` (256 for LCM_Dreamshaper_v7). */
  timeCondDim: number;
}

/** Test-sized widths: 8/16/32 block channels, hidden 32. */
export const TINY_DIMS: ModelDims = {
  blockChannels: [8, 16, 32],
  hiddenSize: 32,
  vaeChannels: 8,
  timeCondDim: 256,
};

/** SD 1.5 widths, for graphs whose I/O shapes match the real models (benchmarks). */
export const SD15_DIMS: ModelDims = {
  blockChannels: [320, 640, 1280],
  hiddenSize: 768,
  vaeChannels: 128,
  timeCondDim: 256,
};

/** Which exporter's conventions to copy. */
export type Flavour = "diffusers" | "optimum";

/**
 * UNet timestep input: diffusers script float `[batch]` (v0.8.0 on); the
 * script before v0.8.0 int64 `[batch]` (its dummy was `torch.LongTensor([0, 1])`,
 * so the pinned runwayml fp32 export, diffusers 0.6.0, takes it); Optimum
 * ≤1.23 int64 `[steps]`; Optimum ≥1.24 rank-0 float.
 */
export type TimestepStyle = "float_batch" | "int64_batch" | "int64_steps" | "float_scalar";

/** How one model set is exported. */
export interface ExportOptions {
  /** Naming, dtype and external-data conventions. */
  flavour: Flavour;
  /** Float type of every float input/output (fp16 = "io16" exports). */
  io: IoFloat;
  /** UNet timestep style; default float_batch (diffusers) / int64_steps (optimum). */
  timestep?: TimestepStyle;
  /** UNet takes `timestep_cond` (LCM). */
  timestepCond?: boolean;
  /** VAE decoder upsampling. */
  upsample?: "nearest" | "linear";
  /**
   * VAE encoder output: `latent_sample`, drawn inside the graph by a
   * `RandomNormalLike` node as `encode(x).latent_dist.sample()` traces (the
   * diffusers script, Optimum ≤ 1.22), or `latent_parameters`, mean ‖ logvar
   * (Optimum ≥ 1.23). Default: `latent_sample` for diffusers, `latent_parameters`
   * for optimum.
   */
  vaeEncoder?: VaeEncoderOutput;
}

/** What a VAE encoder export returns (diffusers script, Optimum ≤ 1.22 or ≥ 1.23). */
export type VaeEncoderOutput = "latent_sample" | "latent_parameters";

/** The VAE encoder output of an export ({@link ExportOptions.vaeEncoder} or its flavour's default). */
export function vaeEncoderOutput(o: ExportOptions): VaeEncoderOutput {
  return o.vaeEncoder ?? (o.flavour === "diffusers" ? "latent_sample" : "latent_parameters");
}

/** The dynamic-axis names one flavour writes. */
export interface AxisNames {
  /** Batch axis ("batch" / "batch_size"). */
  batch: Dim;
  /** Token axis ("sequence" / "sequence_length"). */
  sequence: Dim;
  /** UNet `sample` channel dim (dynamic in the diffusers script, static in Optimum ≥1.20). */
  sampleChannels: Dim;
  /** Latent height (H/8). */
  latentHeight: Dim;
  /** Latent width (W/8). */
  latentWidth: Dim;
  /** Pixel height (VAE encoder / ControlNet image input). */
  imageHeight: Dim;
  /** Pixel width. */
  imageWidth: Dim;
}

/** Axis names of a flavour (diffusers script `dynamic_axes`, Optimum `inputs` properties). */
export function axisNames(flavour: Flavour): AxisNames {
  return flavour === "diffusers"
    ? {
      batch: "batch",
      sequence: "sequence",
      sampleChannels: "channels",
      latentHeight: "height",
      latentWidth: "width",
      imageHeight: "image_height",
      imageWidth: "image_width",
    }
    : {
      batch: "batch_size",
      sequence: "sequence_length",
      sampleChannels: 4,
      latentHeight: "height",
      latentWidth: "width",
      imageHeight: "sample_height",
      imageWidth: "sample_width",
    };
}

/** Default timestep style of a flavour. */
export function timestepStyle(o: ExportOptions): TimestepStyle {
  return o.timestep ?? (o.flavour === "diffusers" ? "float_batch" : "int64_steps");
}

/** External-data file name of a flavour: diffusers `weights.pb`, Optimum `model.onnx_data`. */
export function externalDataName(flavour: Flavour): string {
  return flavour === "diffusers" ? "weights.pb" : "model.onnx_data";
}
