/**
 * Architecture configs of the SD 1.x graphs (`sd15.ts`), in the terms of
 * diffusers' `UNet2DConditionModel` / `AutoencoderKL` configs and
 * transformers' `CLIPTextConfig`, the real SD 1.5 values
 * (runwayml/stable-diffusion-v1-5 `unet/config.json`, `vae/config.json`,
 * `text_encoder/config.json`), and their inference from a diffusers-named
 * weight map's shapes, so that a checkpoint of any width of this structure
 * converts (the real SD 1.5 gives the real config; test-sized checkpoints
 * give theirs).
 *
 * What shapes cannot tell is fixed by the family: SD 1.x UNets use 8
 * attention heads in every block (diffusers' `attention_head_dim: 8`, which
 * there counts heads), CLIP text models 64-wide heads (12 for the 768-wide
 * ViT-L/14 text model), GroupNorm 32 groups. Test-sized widths that are not
 * a multiple of these get the rule in {@link unetHeads} / {@link clipHeads}.
 *
 * @module
 */

import type { WeightMap } from "./weights.ts";

/** The UNet's architecture (diffusers `UNet2DConditionModel` config). */
export interface UnetConfig {
  /** `in_channels` (4; 9 would be an inpainting UNet). */
  inChannels: number;
  /** `out_channels`. */
  outChannels: number;
  /** `block_out_channels`, one width per down block. */
  blockOutChannels: readonly number[];
  /** `layers_per_block`: ResNets per down block (up blocks have one more). */
  layersPerBlock: number;
  /** Per down block: CrossAttnDownBlock2D (true) or DownBlock2D; up blocks mirror it. */
  crossAttention: readonly boolean[];
  /** `transformer_layers_per_block`: BasicTransformerBlocks per Transformer2D. */
  transformerLayers: number;
  /** Attention heads in every Transformer2D (SD 1.x: 8). */
  attentionHeads: number;
  /** `cross_attention_dim`: the text encoder's hidden width. */
  crossAttentionDim: number;
  /** `norm_num_groups`. */
  normGroups: number;
  /** `norm_eps` of the ResNets and the output norm. */
  normEps: number;
  /** Width of the time embedding MLP (4 × block_out_channels[0]). */
  timeEmbedDim: number;
}

/** The text encoder's architecture (transformers `CLIPTextConfig`). */
export interface TextEncoderConfig {
  /** `vocab_size`. */
  vocabSize: number;
  /** `hidden_size`. */
  hiddenSize: number;
  /** `intermediate_size` of the MLP. */
  intermediateSize: number;
  /** `num_hidden_layers`. */
  layers: number;
  /** `num_attention_heads`. */
  attentionHeads: number;
  /** `max_position_embeddings`. */
  maxPositions: number;
  /** `layer_norm_eps`. */
  layerNormEps: number;
}

/** The VAE's architecture (diffusers `AutoencoderKL` config). */
export interface VaeConfig {
  /** `in_channels` (image channels). */
  inChannels: number;
  /** `out_channels`. */
  outChannels: number;
  /** `latent_channels`. */
  latentChannels: number;
  /** `block_out_channels` of the encoder's down blocks (the decoder's reversed). */
  blockOutChannels: readonly number[];
  /** `layers_per_block`: ResNets per encoder block (decoder blocks have one more). */
  layersPerBlock: number;
  /** `norm_num_groups`. */
  normGroups: number;
}

/** SD 1.5's UNet (runwayml/stable-diffusion-v1-5 `unet/config.json`). */
export const SD15_UNET: UnetConfig = {
  inChannels: 4,
  outChannels: 4,
  blockOutChannels: [320, 640, 1280, 1280],
  layersPerBlock: 2,
  crossAttention: [true, true, true, false],
  transformerLayers: 1,
  attentionHeads: 8,
  crossAttentionDim: 768,
  normGroups: 32,
  normEps: 1e-5,
  timeEmbedDim: 1280,
};

/** SD 1.5's text encoder (openai/clip-vit-large-patch14's text model). */
export const SD15_TEXT_ENCODER: TextEncoderConfig = {
  vocabSize: 49408,
  hiddenSize: 768,
  intermediateSize: 3072,
  layers: 12,
  attentionHeads: 12,
  maxPositions: 77,
  layerNormEps: 1e-5,
};

/** SD 1.5's VAE (`vae/config.json`). */
export const SD15_VAE: VaeConfig = {
  inChannels: 3,
  outChannels: 3,
  latentChannels: 4,
  blockOutChannels: [128, 256, 512, 512],
  layersPerBlock: 2,
  normGroups: 32,
};

/** SD 1.x UNet heads: 8 (diffusers `attention_head_dim: 8`); 1 for widths 8 does not divide. */
export function unetHeads(widths: readonly number[]): number {
  return widths.every((w) => w % 8 === 0) ? 8 : 1;
}

/** CLIP text heads: 64-wide heads; 2 (or 1) for test widths that are not a multiple of 64. */
export function clipHeads(hidden: number): number {
  if (hidden % 64 === 0) return hidden / 64;
  return hidden % 2 === 0 ? 2 : 1;
}

/** GroupNorm groups: 32, or the largest divisor of every width below it (test widths). */
export function normGroups(widths: readonly number[]): number {
  for (let g = 32; g > 1; g--) if (widths.every((w) => w % g === 0)) return g;
  return 1;
}

/** A weight map that does not hold an SD 1.x component; the message says what was found. */
export class ArchitectureError extends Error {
  /** Creates an error with a complete message. */
  constructor(message: string) {
    super(message);
    this.name = "ArchitectureError";
  }
}

/** The shape of `name`, or an error naming it. */
function shape(map: WeightMap, name: string, component: string): readonly number[] {
  const e = map.get(name);
  if (!e) throw new ArchitectureError(`${component}: no weight ${name}`);
  return e.shape;
}

/** How many `prefix<i>.<suffix>` exist for i = 0, 1, … */
function count(map: WeightMap, prefix: string, suffix: string): number {
  let n = 0;
  while (map.has(`${prefix}${n}.${suffix}`)) n++;
  return n;
}

/** The UNet config these weights (diffusers `UNet2DConditionModel` names) have. */
export function inferUnetConfig(map: WeightMap): UnetConfig {
  const what = "UNet";
  const convIn = shape(map, "conv_in.weight", what);
  const blocks = count(map, "down_blocks.", "resnets.0.conv1.weight");
  if (blocks === 0) throw new ArchitectureError(`${what}: no down_blocks.0.resnets.0.conv1.weight`);
  const widths = Array.from(
    { length: blocks },
    (_, i) => shape(map, `down_blocks.${i}.resnets.0.conv1.weight`, what)[0],
  );
  const crossAttention = widths.map((_, i) =>
    map.has(`down_blocks.${i}.attentions.0.proj_in.weight`)
  );
  const first = crossAttention.indexOf(true);
  if (first < 0) throw new ArchitectureError(`${what}: no cross-attention block`);
  const toK = shape(
    map,
    `down_blocks.${first}.attentions.0.transformer_blocks.0.attn2.to_k.weight`,
    what,
  );
  const groups = normGroups(widths);
  return {
    inChannels: convIn[1],
    outChannels: shape(map, "conv_out.weight", what)[0],
    blockOutChannels: widths,
    layersPerBlock: count(map, "down_blocks.0.resnets.", "conv1.weight"),
    crossAttention,
    transformerLayers: count(
      map,
      `down_blocks.${first}.attentions.0.transformer_blocks.`,
      "attn1.to_q.weight",
    ),
    attentionHeads: unetHeads(widths),
    crossAttentionDim: toK[1],
    normGroups: groups,
    normEps: 1e-5,
    timeEmbedDim: shape(map, "time_embedding.linear_1.weight", what)[0],
  };
}

/** The text encoder config these weights (transformers `CLIPTextModel` names) have. */
export function inferTextEncoderConfig(map: WeightMap): TextEncoderConfig {
  const what = "text encoder";
  const tok = shape(map, "text_model.embeddings.token_embedding.weight", what);
  const pos = shape(map, "text_model.embeddings.position_embedding.weight", what);
  const layers = count(map, "text_model.encoder.layers.", "self_attn.q_proj.weight");
  if (layers === 0) throw new ArchitectureError(`${what}: no text_model.encoder.layers.0`);
  return {
    vocabSize: tok[0],
    hiddenSize: tok[1],
    intermediateSize: shape(map, "text_model.encoder.layers.0.mlp.fc1.weight", what)[0],
    layers,
    attentionHeads: clipHeads(tok[1]),
    maxPositions: pos[0],
    layerNormEps: 1e-5,
  };
}

/** The VAE config these weights (diffusers `AutoencoderKL` names) have. */
export function inferVaeConfig(map: WeightMap): VaeConfig {
  const what = "VAE";
  // The encoder's blocks name the widths; a decoder-only map reads them from the decoder.
  const encoderBlocks = count(map, "encoder.down_blocks.", "resnets.0.conv1.weight");
  let widths: number[];
  let layersPerBlock: number;
  if (encoderBlocks > 0) {
    widths = Array.from(
      { length: encoderBlocks },
      (_, i) => shape(map, `encoder.down_blocks.${i}.resnets.0.conv1.weight`, what)[0],
    );
    layersPerBlock = count(map, "encoder.down_blocks.0.resnets.", "conv1.weight");
  } else {
    const n = count(map, "decoder.up_blocks.", "resnets.0.conv1.weight");
    if (n === 0) {
      throw new ArchitectureError(`${what}: no encoder.down_blocks or decoder.up_blocks`);
    }
    widths = Array.from(
      { length: n },
      (_, i) => shape(map, `decoder.up_blocks.${i}.resnets.0.conv1.weight`, what)[0],
    ).reverse();
    layersPerBlock = count(map, "decoder.up_blocks.0.resnets.", "conv1.weight") - 1;
  }
  const latent = map.has("decoder.conv_in.weight")
    ? shape(map, "decoder.conv_in.weight", what)[1]
    : shape(map, "encoder.conv_out.weight", what)[0] / 2;
  return {
    inChannels: map.has("encoder.conv_in.weight")
      ? shape(map, "encoder.conv_in.weight", what)[1]
      : 3,
    outChannels: map.has("decoder.conv_out.weight")
      ? shape(map, "decoder.conv_out.weight", what)[0]
      : 3,
    latentChannels: latent,
    blockOutChannels: widths,
    layersPerBlock,
    normGroups: normGroups(widths),
  };
}
