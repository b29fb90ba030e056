/**
 * Child process of the webgpu tests: starts the engine on webgpu with
 * image-to-image enabled on a model folder whose files are the fp32-I/O tiny
 * set's except the VAE encoder, which is the fp16 set's (a diffusers export
 * that samples inside the graph, so it is opened from its rewritten bytes).
 * Prints one JSON line: how start-up failed, or that it did not.
 *
 * ```sh
 * deno run -P=test tests/helpers/fp16_encoder_child.ts
 * ```
 *
 * @module
 */

import { join } from "node:path";
import { createEngine } from "../../mod/pipeline/mod.ts";
import { tinyConfig } from "../../mod/pipeline/_testing.ts";
import { ROOT } from "./paths.ts";

const root = join(ROOT, "tests/fixtures/tiny/models");
const base = await Deno.makeTempDir({ prefix: "sd15-fp16-encoder-" });
let report: Record<string, unknown>;
try {
  for (const part of ["scheduler", "tokenizer", "text_encoder", "unet", "vae_decoder"]) {
    await Deno.symlink(join(root, "sd15", part), join(base, part));
  }
  await Deno.symlink(join(root, "sd15-fp16", "vae_encoder"), join(base, "vae_encoder"));
  const config = { ...tinyConfig(root), imageToImage: { strengths: [] } };
  config.models.base = base;
  config.runtime.executionProvider = "webgpu";
  try {
    const engine = await createEngine(config);
    report = { started: true, vaeEncoder: engine.info.vaeEncoder };
    await engine.release();
  } catch (e) {
    const error = e as Error;
    report = { started: false, name: error.name, message: error.message, base };
  }
} finally {
  await Deno.remove(base, { recursive: true });
}
console.log(JSON.stringify(report));
