/**
 * The tiny VAE decoder (TAESD, madebyollin/taesd `taesd.py`) with the real
 * operator structure at any width: `tanh(x/3)·3` clamp,
 * conv 4→C, ReLU, three stages of [Block ×3, nearest ×2 upsample, bias-free
 * conv], Block, conv C→3, where Block = conv-ReLU-conv-ReLU-conv + identity
 * skip, then ReLU. The output is mapped to [-1, 1] by `x·2 − 1` as diffusers'
 * `DecoderTiny` does, and the I/O is Optimum's `VaeDecoderOnnxConfig`
 * (`latent_sample` → `sample`), the contract of the deinferno/taesd-onnx and
 * julienkay/taesd exports: latents are fed as the UNet makes them (scale
 * factor 1, no `/0.18215`).
 *
 * At C = 64 it has exactly TAESD's 1,222,531 decoder parameters.
 *
 * @module
 */

import type { EncodedModel } from "../graph/graph.ts";
import { Layers, OPSET } from "../graph/layers.ts";
import type { IoFloat } from "../graph/layers.ts";
import { Rng } from "../graph/rng.ts";

/** TAESD's decoder width. */
export const TAESD_CHANNELS = 64;

/** Builds the TAESD decoder with `channels` (64 = the real model, 8 for tests). */
export function buildTaesdDecoder(
  seed: number,
  channels: number,
  io: IoFloat = "float32",
): EncodedModel {
  const L = new Layers("taesd_decoder", new Rng(seed, "taesd_decoder"), io);
  const C = channels;
  const relu = (x: string) => L.g.op("Relu", [x]);
  let block = 0;
  const taesdBlock = (x: string) => {
    const b = block++;
    const h1 = relu(L.conv(x, C, C, 3, { hint: `block${b}_conv0` }));
    const h2 = relu(L.conv(h1, C, C, 3, { hint: `block${b}_conv1` }));
    const h3 = L.conv(h2, C, C, 3, { hint: `block${b}_conv2` });
    return relu(L.add(h3, x));
  };
  const z = L.floatIn("latent_sample", ["batch_size", 4, "latent_height", "latent_width"]);
  const clamped = L.scale(L.g.op("Tanh", [L.scale(z, 1 / 3)]), 3);
  let x = relu(L.conv(clamped, 4, C, 3, { hint: "conv_in" }));
  for (let stage = 0; stage < 3; stage++) {
    for (let i = 0; i < 3; i++) x = taesdBlock(x);
    x = L.conv(L.upscale(x, 2, "nearest"), C, C, 3, { hint: `up${stage}_conv`, bias: null });
  }
  x = taesdBlock(x);
  const out = L.conv(x, C, 3, 3, { hint: "conv_out" });
  L.floatOut(L.shift(L.scale(out, 2), -1), "sample", ["batch_size", 3, "height", "width"]);
  return L.g.encode({ opset: OPSET, docString: `TAESD decoder, width ${C} (random weights)` });
}
