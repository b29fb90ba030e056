/**
 * Hugging Face diffusers / PEFT LoRA keys, turned into the same
 * {@link LoraModule}s as kohya keys:
 *
 * - PEFT as diffusers saves it (`save_lora_weights` with the PEFT backend):
 *   `unet.<module>.lora_A.weight` ([rank, in(, k, k)], the down factor) and
 *   `unet.<module>.lora_B.weight` ([out, rank(, 1, 1)], the up factor);
 *   `text_encoder.<module>…` for CLIP; raw PEFT state dicts
 *   (`get_peft_model_state_dict`) carry `base_model.model.<module>…` instead
 *   (luosiallen/latent-consistency-model#57 shows such keys), read as UNet;
 * - diffusers' pre-PEFT format: `unet.<module>.lora.down.weight` /
 *   `.lora.up.weight`;
 * - an optional `<prefix>.<module>.alpha` scalar; without it alpha = rank
 *   (scale 1), what diffusers assumes when a file carries no alphas.
 *
 * `<module>` is the diffusers/transformers module path with dots
 * (`down_blocks.0.attentions.0.proj_in`); with the dots turned into "_" it is
 * exactly the base of the kohya key, so matching ONNX nodes works the same.
 *
 * @module
 */

import type { KohyaLora, LoraModule, LoraTarget } from "./kohya_keys.ts";
import type { FloatTensor } from "./safetensors.ts";

/** Key prefixes of the diffusers/PEFT layout and the model each adapts. */
export const PEFT_PREFIXES: ReadonlyArray<readonly [string, LoraTarget]> = [
  ["unet.", "unet"],
  ["text_encoder.", "text_encoder"],
  ["base_model.model.", "unet"],
];

const FACTOR = /^(.+)\.(lora_A\.weight|lora_B\.weight|lora\.down\.weight|lora\.up\.weight|alpha)$/;

/**
 * Groups diffusers/PEFT tensors into modules; names that are not in this
 * layout are returned as unknown.
 *
 * @param source file name for error messages
 * @throws Error naming `source` and the module when a factor is missing or
 *   the shapes disagree
 */
export function peftModules(tensors: ReadonlyMap<string, FloatTensor>, source: string): KohyaLora {
  const parts = new Map<
    string,
    { target: LoraTarget; module: string; t: Record<string, FloatTensor> }
  >();
  const unknownKeys: string[] = [];
  for (const [name, tensor] of tensors) {
    const prefix = PEFT_PREFIXES.find(([p]) => name.startsWith(p));
    const m = prefix ? FACTOR.exec(name.slice(prefix[0].length)) : null;
    if (!prefix || !m) {
      unknownKeys.push(name);
      continue;
    }
    const [, module, suffix] = m;
    const key = prefix[0] + module;
    let entry = parts.get(key);
    if (!entry) {
      entry = { target: prefix[1], module, t: {} };
      parts.set(key, entry);
    }
    const role = suffix === "alpha" ? "alpha" : /lora_A|down/.test(suffix) ? "down" : "up";
    entry.t[role] = tensor;
  }
  const modules: LoraModule[] = [];
  for (const [key, { target, module, t }] of parts) {
    const { down, up } = t;
    if (!down || !up) {
      throw new Error(
        `${source}: module "${key}" has no ${down ? "lora_B (up)" : "lora_A (down)"} weight`,
      );
    }
    const rank = down.shape[0];
    if (
      down.shape.length < 2 || up.shape.length < 2 || rank < 1 || up.shape[1] !== rank ||
      up.shape.slice(2).some((d) => d !== 1)
    ) {
      throw new Error(
        `${source}: module "${key}" has lora_A [${down.shape}] and lora_B [${up.shape}]; ` +
          `expected [rank, in(, k, k)] and [out, rank(, 1, 1)]`,
      );
    }
    let alpha = rank;
    if (t.alpha) {
      if (t.alpha.data.length !== 1 || !Number.isFinite(t.alpha.data[0])) {
        throw new Error(`${source}: module "${key}" alpha must be one finite number`);
      }
      alpha = t.alpha.data[0];
    }
    modules.push({ key, target, base: module.replaceAll(".", "_"), down, up, alpha });
  }
  return { modules, unknownKeys };
}
