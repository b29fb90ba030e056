/**
 * A models root for the fast preset (the CPU provider's default) from the
 * tiny set: `sd15/` copied, an LCM-LoRA stand-in (kohya layout, built) at
 * the path the shipped config names, and TAESD's decoder as the shipped
 * lock has it: a `taesd_decoder.safetensors` (random weights with the real
 * keys and shapes) that the real converter turns into
 * `taesd/vae_decoder/model.onnx`, a `[[derived]]` folder. Its lock pins
 * exactly these files, so a config naming `base = "sd15"` needs nothing else.
 *
 * @module
 */

import { join } from "node:path";
import { randomTaesdWeights, taesdSafetensors } from "../../mod/convert/taesd_testing.ts";
import {
  buildHyperSdLora,
  buildTinyLora,
  lockEntry,
  lockText,
  parseLock,
} from "../fixtures/builder/mod.ts";
import { derivedToml } from "../../mod/models/mod.ts";
import { copyDir } from "./copy_dir.ts";
import { ROOT } from "./paths.ts";

/** Where the shipped config.toml looks for the LCM LoRA (`[models] lcm_lora`). */
export const LCM_LORA = "lora/lcm-lora-sdv1-5/pytorch_lora_weights.safetensors";
/** Where the shipped config.toml looks for the Hyper-SD LoRA (`[models] turbo_lora`). */
export const TURBO_LORA = "lora/hyper-sd/Hyper-SD15-1step-lora.safetensors";
/** The pinned TAESD decoder weights the tiny VAE is derived from. */
export const TAESD_SAFETENSORS = "taesd/taesd_decoder.safetensors";

/** The `[[derived]]` table of the TAESD decoder, as in the shipped models.lock. */
const TAESD_DERIVED = derivedToml({
  component: "vae_decoder",
  path: "taesd/vae_decoder",
  converter: "taesd",
  from: [TAESD_SAFETENSORS],
});

/**
 * Lays out `models` (created) and returns the text of its lock (write it as
 * `models.lock`, or as the shipped lock's `models.local.lock`).
 */
export async function layOutFastModels(models: string): Promise<string> {
  const fixtures = join(ROOT, "tests/fixtures/tiny");
  await copyDir(join(fixtures, "models/sd15"), join(models, "sd15"));
  const lora = buildTinyLora(41, { rank: 4, alpha: 4 });
  const taesd = taesdSafetensors(randomTaesdWeights(5));
  for (const [path, bytes] of [[LCM_LORA, lora], [TAESD_SAFETENSORS, taesd]] as const) {
    await Deno.mkdir(join(models, path, ".."), { recursive: true });
    await Deno.writeFile(join(models, path), bytes);
  }
  const entries = parseLock(await Deno.readTextFile(join(fixtures, "models.lock")))
    .filter((e) => e.path.startsWith("sd15/"));
  entries.push(
    lockEntry("lora", LCM_LORA, lora),
    lockEntry("vae_decoder", TAESD_SAFETENSORS, taesd),
  );
  return `${lockText(entries)}\n${TAESD_DERIVED}`;
}

/**
 * {@link layOutFastModels} plus what the turbo preset and every image tool
 * need: a Hyper-SD-shaped LoRA stand-in (kohya keys, float32, as the
 * published file) at the path the shipped config names, and the tiny set's
 * ControlNets, residual UNet and annotators (guided and inpaint). Returns the
 * lock text.
 */
export async function layOutPresetModels(models: string): Promise<string> {
  const fixtures = join(ROOT, "tests/fixtures/tiny");
  const fast = await layOutFastModels(models);
  for (const dir of ["controlnet", "annotators"]) {
    await copyDir(join(fixtures, "models", dir), join(models, dir));
  }
  const hyper = buildHyperSdLora(43, { rank: 4, scale: 0.2 });
  await Deno.mkdir(join(models, TURBO_LORA, ".."), { recursive: true });
  await Deno.writeFile(join(models, TURBO_LORA), hyper);
  const more = parseLock(await Deno.readTextFile(join(fixtures, "models.lock")))
    .filter((e) => e.path.startsWith("controlnet/") || e.path.startsWith("annotators/"));
  more.push(lockEntry("lora", TURBO_LORA, hyper));
  return `${lockText(more)}\n${fast}`;
}
