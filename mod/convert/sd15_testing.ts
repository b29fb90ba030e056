/**
 * Test support for the SD 1.x converter: test-sized architectures (the real
 * structure at tiny widths, CLIP with the real 49408-token vocabulary and 77
 * positions), and the random weights of the builder's own stand-ins exported
 * as diffusers-named maps (what `mod/checkpoint` hands the converter), so a
 * converted model can be compared with the stand-in built from the same seed.
 *
 * @module
 */

import {
  buildSd15TextEncoder,
  buildSd15Unet,
  buildSd15VaeDecoder,
  buildSd15VaeEncoder,
  numel,
  RandomWeights,
  Rng,
  type Sd15Model,
  type TextEncoderConfig,
  transpose,
  type UnetConfig,
  type VaeConfig,
  type WeightData,
  type WeightEntry,
  type WeightRequest,
  type WeightSource,
} from "../graph/mod.ts";
import type { Sd15WeightMaps } from "./sd15.ts";

/** A test-sized SD 1.x UNet: blocks 32/64/64/64, 2 layers per block (13 residuals), context 32. */
export const TEST_UNET: UnetConfig = {
  inChannels: 4,
  outChannels: 4,
  blockOutChannels: [32, 64, 64, 64],
  layersPerBlock: 2,
  crossAttention: [true, true, true, false],
  transformerLayers: 1,
  attentionHeads: 8,
  crossAttentionDim: 32,
  normGroups: 32,
  normEps: 1e-5,
  timeEmbedDim: 128,
};

/** A test-sized CLIP text model: 2 layers × 32 (2 heads), the real vocabulary and positions. */
export const TEST_TEXT_ENCODER: TextEncoderConfig = {
  vocabSize: 49408,
  hiddenSize: 32,
  intermediateSize: 64,
  layers: 2,
  attentionHeads: 2,
  maxPositions: 77,
  layerNormEps: 1e-5,
};

/** A test-sized AutoencoderKL: blocks 32/32/64/64, one ResNet per encoder block (8× latents). */
export const TEST_VAE: VaeConfig = {
  inChannels: 3,
  outChannels: 3,
  latentChannels: 4,
  blockOutChannels: [32, 32, 64, 64],
  layersPerBlock: 1,
  normGroups: 32,
};

/** The random stream of each model of a test checkpoint. */
const STREAMS = {
  unet: "sd15-test/unet",
  textEncoder: "sd15-test/text_encoder",
  vaeDecoder: "sd15-test/vae_decoder",
  vaeEncoder: "sd15-test/vae_encoder",
} as const;

/** The builder's random stand-ins of a test checkpoint (the reference a conversion must equal). */
export function randomTestModels(seed: number): {
  unet: Sd15Model;
  controlnetUnet: Sd15Model;
  textEncoder: Sd15Model;
  vaeDecoder: Sd15Model;
  vaeEncoder: Sd15Model;
} {
  return {
    unet: buildSd15Unet(new Rng(seed, STREAMS.unet), { config: TEST_UNET }),
    controlnetUnet: buildSd15Unet(new Rng(seed, STREAMS.unet), {
      config: TEST_UNET,
      residuals: true,
      name: "controlnet_unet",
    }),
    textEncoder: buildSd15TextEncoder(new Rng(seed, STREAMS.textEncoder), TEST_TEXT_ENCODER),
    vaeDecoder: buildSd15VaeDecoder(new Rng(seed, STREAMS.vaeDecoder), TEST_VAE),
    vaeEncoder: buildSd15VaeEncoder(new Rng(seed, STREAMS.vaeEncoder), TEST_VAE),
  };
}

/**
 * Records every tensor a builder asks a random source for, under its
 * diffusers name in the state-dict layout (a Linear `[out, in]`, a norm `[C]`).
 */
class Exporter implements WeightSource {
  readonly entries = new Map<string, WeightEntry>();
  readonly #random: RandomWeights;
  constructor(rng: Rng) {
    this.#random = new RandomWeights(rng, true);
  }
  tensor(request: WeightRequest): WeightData {
    const data = this.#random.tensor(request);
    const { dims, layout } = request;
    const norm = "fill" in request.init && dims.length === 3;
    const shape = layout === "transposed" ? [dims[1], dims[0]] : norm ? [dims[0]] : [...dims];
    const values = async () => {
      const v = (typeof data === "function" ? await data() : data) as Float32Array;
      return layout === "transposed" ? transpose(v, dims[0], dims[1]) : v;
    };
    this.entries.set(request.name, { dtype: "F32", shape, read: values });
    return data;
  }
}

/** A map entry of fixed values (buffers a checkpoint carries that no model uses). */
function fixed(shape: number[], fill = 0): WeightEntry {
  return {
    dtype: "I64",
    shape,
    read: () => Promise.resolve(new Float32Array(numel(shape)).fill(fill)),
  };
}

/** The architectures of a random checkpoint; default the test-sized ones. */
export interface RandomArchitecture {
  /** UNet config. */
  unet?: UnetConfig;
  /** Text encoder config. */
  textEncoder?: TextEncoderConfig;
  /** VAE config. */
  vae?: VaeConfig;
}

/**
 * The weights of {@link randomTestModels}(seed) as diffusers-named maps (plus
 * the `text_model.embeddings.position_ids` buffer transformers checkpoints
 * carry, which no model uses), as `mod/checkpoint` reads a checkpoint. Values
 * are made when read; with other architectures (e.g. SD 1.5's, to measure a
 * full-size conversion) the same streams at those widths.
 */
export function randomTestWeights(
  seed: number,
  architecture: RandomArchitecture = {},
): Required<Sd15WeightMaps> {
  const vaeConfig = architecture.vae ?? TEST_VAE;
  const unet = new Exporter(new Rng(seed, STREAMS.unet));
  buildSd15Unet(unet, { config: architecture.unet ?? TEST_UNET });
  const text = new Exporter(new Rng(seed, STREAMS.textEncoder));
  buildSd15TextEncoder(text, architecture.textEncoder ?? TEST_TEXT_ENCODER);
  text.entries.set("text_model.embeddings.position_ids", fixed([1, 77]));
  const decoder = new Exporter(new Rng(seed, STREAMS.vaeDecoder));
  buildSd15VaeDecoder(decoder, vaeConfig);
  const encoder = new Exporter(new Rng(seed, STREAMS.vaeEncoder));
  buildSd15VaeEncoder(encoder, vaeConfig);
  return {
    unet: unet.entries,
    textEncoder: text.entries,
    vae: new Map([...decoder.entries, ...encoder.entries]),
  };
}
