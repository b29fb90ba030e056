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
import { buildTinyLora, lockEntry, lockText, parseLock } from "../../mod/model_builder/mod.ts";
import { derivedToml } from "../../mod/models/mod.ts";
import { copyDir } from "./copy_dir.ts";
import { ROOT } from "./paths.ts";

/** Where the shipped config.toml looks for the LCM LoRA (`[models] lcm_lora`). */
export const LCM_LORA = "lora/lcm-lora-sdv1-5/pytorch_lora_weights.safetensors";
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
