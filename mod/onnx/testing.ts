/**
 * Helpers for this folder's tests. Not part of the public API.
 *
 * @module
 */

import { Tensor } from "./runtime.ts";
import { floatTensor } from "./tensors.ts";

/** Smooth, deterministic inputs for one step of the test-sized UNet (8×8 latent, width 32). */
export function tinyUnetFeeds(): Record<string, Tensor> {
  const sample = Float32Array.from({ length: 4 * 8 * 8 }, (_, i) => Math.sin(i));
  const ehs = Float32Array.from({ length: 77 * 32 }, (_, i) => Math.cos(i / 7));
  return {
    sample: floatTensor("float32", sample, [1, 4, 8, 8]),
    timestep: new Tensor("float32", Float32Array.from([500]), [1]),
    encoder_hidden_states: floatTensor("float32", ehs, [1, 77, 32]),
  };
}
