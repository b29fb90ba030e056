/**
 * kohya-format LoRA keys (kohya sd-scripts `networks/lora.py`): one module
 * per torch layer, named `lora_unet_<path>` (UNet) or `lora_te_<path>` (CLIP
 * text encoder) where `<path>` is the diffusers/transformers module path with
 * "." replaced by "_", carrying `.lora_down.weight` ([rank, in] or
 * [rank, in, k, k]), `.lora_up.weight` ([out, rank] or [out, rank, 1, 1]) and
 * an optional scalar `.alpha` (default: the rank).
 *
 * ONNX node names from a torch export carry the module scope
 * (`/down_blocks.0/resnets.0/conv1/Conv`); {@link fixNodeName} turns them into
 * the same form as onnx-web `api/onnx_web/convert/diffusion/lora.py` does
 * (`fix_node_name`), so `<path>_Conv` / `<path>_MatMul` / `<path>_Gemm` match.
 *
 * @module
 */

import type { FloatTensor } from "./safetensors.ts";

/** Which model a LoRA module adapts. */
export type LoraTarget = "unet" | "text_encoder";

/** One adapted layer: the low-rank factors of its weight update. */
export interface LoraModule {
  /** The kohya module key, e.g. `lora_unet_conv_in`. */
  key: string;
  /** The model it belongs to. */
  target: LoraTarget;
  /** The key without its prefix: the fixed node name without `_<OpType>`. */
  base: string;
  /** `lora_down.weight`: [rank, in] or [rank, in, k, k]. */
  down: FloatTensor;
  /** `lora_up.weight`: [out, rank] or [out, rank, 1, 1]. */
  up: FloatTensor;
  /** `alpha`, or the rank when the file has none (kohya's default). */
  alpha: number;
}

/** The modules of one LoRA file and the tensor names that are not kohya LoRA keys. */
export interface KohyaLora {
  /** Complete modules (down + up [+ alpha]), in file order. */
  modules: LoraModule[];
  /** Tensor names without a known prefix or suffix (they can match nothing). */
  unknownKeys: string[];
}

/** kohya prefixes of SD 1.5 LoRAs and the model each adapts. */
export const KOHYA_PREFIXES: ReadonlyArray<readonly [string, LoraTarget]> = [
  ["lora_unet_", "unet"],
  ["lora_te_", "text_encoder"],
];

/** LyCORIS suffixes this server does not apply (LoHA, LoKr, LoCon CP, DoRA). */
const UNSUPPORTED = /^(hada_|lokr_|lora_mid|dora_scale)/;

/**
 * Node name → kohya form: "/" and "." become "_" and a leading "_" is
 * dropped (onnx-web `fix_node_name`). `/conv_in/Conv` → `conv_in_Conv`.
 */
export function fixNodeName(name: string): string {
  const fixed = name.replaceAll("/", "_").replaceAll(".", "_");
  return fixed.startsWith("_") ? fixed.slice(1) : fixed;
}

/**
 * Groups the tensors of a kohya LoRA file into modules.
 *
 * @param source file name for error messages
 * @throws Error naming `source` and the key for LyCORIS-only tensors, a
 *   module without its up or down factor, or factors whose shapes disagree
 */
export function kohyaModules(tensors: ReadonlyMap<string, FloatTensor>, source: string): KohyaLora {
  const parts = new Map<
    string,
    { target: LoraTarget; base: string; t: Record<string, FloatTensor> }
  >();
  const unknownKeys: string[] = [];
  for (const [name, tensor] of tensors) {
    const dot = name.indexOf(".");
    const key = dot < 0 ? name : name.slice(0, dot);
    const suffix = dot < 0 ? "" : name.slice(dot + 1);
    const prefix = KOHYA_PREFIXES.find(([p]) => key.startsWith(p) && key.length > p.length);
    if (!prefix) {
      unknownKeys.push(name);
      continue;
    }
    if (UNSUPPORTED.test(suffix)) {
      throw new Error(
        `${source}: tensor "${name}" is a LyCORIS (LoHA/LoKr/CP/DoRA) factor; only plain ` +
          `LoRA/LoCon (lora_down, lora_up, alpha) is supported`,
      );
    }
    if (!["lora_down.weight", "lora_up.weight", "alpha"].includes(suffix)) {
      unknownKeys.push(name);
      continue;
    }
    let entry = parts.get(key);
    if (!entry) {
      entry = { target: prefix[1], base: key.slice(prefix[0].length), t: {} };
      parts.set(key, entry);
    }
    entry.t[suffix] = tensor;
  }
  const modules: LoraModule[] = [];
  for (const [key, { target, base, t }] of parts) {
    const down = t["lora_down.weight"];
    const up = t["lora_up.weight"];
    if (!down || !up) {
      throw new Error(
        `${source}: module "${key}" has no ${down ? "lora_up" : "lora_down"}.weight tensor`,
      );
    }
    const rank = down.shape[0];
    const upTail = up.shape.slice(2);
    if (
      down.shape.length < 2 || up.shape.length < 2 || rank < 1 || up.shape[1] !== rank ||
      upTail.some((d) => d !== 1)
    ) {
      throw new Error(
        `${source}: module "${key}" has lora_down [${down.shape}] and lora_up [${up.shape}]; ` +
          `expected [rank, in(, k, k)] and [out, rank(, 1, 1)]`,
      );
    }
    let alpha = rank;
    const a = t["alpha"];
    if (a) {
      if (a.data.length !== 1 || !Number.isFinite(a.data[0])) {
        throw new Error(
          `${source}: module "${key}" alpha must be one finite number, got [${a.data}]`,
        );
      }
      alpha = a.data[0];
    }
    modules.push({ key, target, base, down, up, alpha });
  }
  return { modules, unknownKeys };
}
