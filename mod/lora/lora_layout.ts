/**
 * Reads the modules of one LoRA file in either key layout: kohya
 * (`lora_unet_…`, kohya sd-scripts; the published SD 1.5 LCM LoRA
 * `latent-consistency/lcm-lora-sdv1-5` uses it, per
 * luosiallen/latent-consistency-model#57) or Hugging Face
 * diffusers/PEFT (`unet.….lora_A.weight`).
 *
 * @module
 */

import { type KohyaLora, kohyaModules } from "./kohya_keys.ts";
import { peftModules } from "./peft_keys.ts";
import type { FloatTensor } from "./safetensors.ts";

/**
 * kohya keys first; the names kohya does not know are then read as
 * diffusers/PEFT keys. Names neither layout knows stay unknown (they match
 * nothing and are reported by `LoraSet.assertMatched`).
 */
export function loraModules(tensors: ReadonlyMap<string, FloatTensor>, source: string): KohyaLora {
  const kohya = kohyaModules(tensors, source);
  if (kohya.unknownKeys.length === 0) return kohya;
  const rest = new Map(kohya.unknownKeys.map((k) => [k, tensors.get(k)!]));
  const peft = peftModules(rest, source);
  return { modules: [...kohya.modules, ...peft.modules], unknownKeys: peft.unknownKeys };
}
