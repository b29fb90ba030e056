/**
 * The weight update of one LoRA module in torch layout:
 * ΔW = (up @ down) × (alpha / rank) × weight, with up [out, rank] and down
 * [rank, in·k·k] (a kxk LoCon down conv flattened; the up conv is 1×1), so
 * ΔW is [out, in·k·k] = torch's Linear [out, in] / Conv2d [out, in, k, k]
 * (kohya sd-scripts `networks/lora.py` `LoRAModule.merge_to`; onnx-web
 * `blend_loras` computes the 3×3 case per kernel tap, which is the same sum).
 *
 * @module
 */

import type { LoraModule } from "./kohya_keys.ts";

/** A dense update in torch layout: `rows` × `cols`, row-major. */
export interface LoraDelta {
  /** Output features / channels. */
  rows: number;
  /** Input features × kernel taps. */
  cols: number;
  /** Values, row-major [rows, cols]. */
  data: Float32Array;
}

/** Computes ΔW of `module` scaled by the user `weight`. */
export function loraDelta(module: LoraModule, weight: number): LoraDelta {
  const { up, down } = module;
  const rank = down.shape[0];
  const rows = up.shape[0];
  const cols = down.data.length / rank;
  const scale = weight * module.alpha / rank;
  const data = new Float32Array(rows * cols);
  for (let o = 0; o < rows; o++) {
    const row = o * cols;
    for (let r = 0; r < rank; r++) {
      const u = up.data[o * rank + r] * scale;
      if (u === 0) continue;
      const d = r * cols;
      for (let c = 0; c < cols; c++) data[row + c] += u * down.data[d + c];
    }
  }
  return { rows, cols, data };
}
