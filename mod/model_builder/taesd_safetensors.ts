/**
 * A TAESD decoder `.safetensors` with random weights and exactly the tensors
 * of madebyollin/taesd's `taesd_decoder.safetensors` (the `nn.Sequential` of
 * `taesd.py` `Decoder`: index 1 conv 4→64, Blocks at 3–5, 8–10, 13–15 and 18
 * with `conv.0/2/4`, bias-free upsample convs at 7, 12, 17, conv 64→3 at 19;
 * float32, 1,222,531 parameters, the published file's 4,895,612 bytes less
 * header differences), for the TAESD conversion in tests and benchmarks.
 *
 * @module
 */

import { encodeSafetensors, type SafetensorsEntry } from "./lora.ts";
import { Rng } from "./rng.ts";

/** Builds the file from `seed` (uniform weights in ±1/sqrt(fan_in), like torch's init). */
export function buildTaesdSafetensors(seed: number): Uint8Array {
  const rng = new Rng(seed, "taesd_safetensors");
  const entries: SafetensorsEntry[] = [];
  const conv = (name: string, cin: number, cout: number, bias = true) => {
    const bound = 1 / Math.sqrt(cin * 9);
    entries.push({
      name: `${name}.weight`,
      dtype: "F32",
      shape: [cout, cin, 3, 3],
      data: rng.uniform(cout * cin * 9, bound),
    });
    if (bias) {
      entries.push({
        name: `${name}.bias`,
        dtype: "F32",
        shape: [cout],
        data: rng.uniform(cout, bound),
      });
    }
  };
  conv("1", 4, 64);
  for (const i of [3, 4, 5, 7, 8, 9, 10, 12, 13, 14, 15, 17, 18]) {
    if (i === 7 || i === 12 || i === 17) conv(String(i), 64, 64, false);
    else for (const j of [0, 2, 4]) conv(`${i}.conv.${j}`, 64, 64);
  }
  conv("19", 64, 3);
  return encodeSafetensors(entries);
}
