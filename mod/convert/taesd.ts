/**
 * PLACEHOLDER until the TAESD converter lands (it replaces this file whole):
 * the signature the derived-file code calls, `taesdDecoderToOnnx(safetensors)
 * → ONNX bytes` with the `tiny_vae_decoder` contract, and its version. This
 * stand-in checks that the input is a safetensors file and emits the
 * builder's TAESD-structure decoder with weights seeded from the input's
 * bytes: deterministic and contract-valid, but NOT TAESD's weights.
 *
 * @module
 */

import { createHash } from "node:crypto";
import { parseSafetensors } from "../lora/safetensors.ts";
import { buildTaesdDecoder, TAESD_CHANNELS } from "../model_builder/mod.ts";

/** Version of the conversion; part of every derived TAESD decoder's key. */
export const TAESD_CONVERTER_VERSION = 0;

/** Converts a TAESD decoder `.safetensors` into the ONNX decoder the engine runs. */
export function taesdDecoderToOnnx(safetensors: Uint8Array): Uint8Array {
  parseSafetensors(safetensors, "taesd decoder");
  const digest = createHash("sha256").update(safetensors).digest();
  return buildTaesdDecoder(digest.readUInt32LE(0), TAESD_CHANNELS).model;
}
