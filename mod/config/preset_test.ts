import assert from "node:assert/strict";
import { join } from "node:path";
import { type ModelPathsConfig, neededFiles } from "../models/mod.ts";

/** The absolute paths the model check verifies for `config` (lock entries play no part here). */
const needed = (config: ModelPathsConfig) => neededFiles(config, []).files.map((f) => f.abs);
import { ConfigError, loadConfig } from "./mod.ts";

async function load(text: string) {
  const dir = await Deno.makeTempDir();
  const path = join(dir, "config.toml");
  await Deno.writeTextFile(path, text);
  try {
    return { dir, config: await loadConfig({ path, env: {} }) };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test('preset = "fast": lcm, 4 steps, no CFG, the LCM LoRA appended after [lora] files', async () => {
  const { dir, config } = await load(`[generation]
preset = "fast"
steps = 30
guidance_scale = 7
scheduler = "euler"
[lora]
files = [{ path = "lora/style.safetensors", weight = 0.5 }]
`);
  assert.equal(config.generation.preset, "fast");
  assert.equal(config.generation.scheduler, "lcm");
  assert.equal(config.generation.steps, 4);
  assert.equal(config.generation.guidanceScale, 1);
  assert.deepEqual(config.lora.files, [
    { path: join(dir, "models", "lora/style.safetensors"), weight: 0.5 },
    {
      path: join(dir, "models", "lora/lcm-lora-sdv1-5/pytorch_lora_weights.safetensors"),
      weight: 1,
    },
  ]);
  // The model check then requires the LCM LoRA like any configured LoRA.
  assert.ok(needed(config).includes(config.models.lcmLora));
});

Deno.test("the default preset keeps the configured sampling and adds no LoRA", async () => {
  const { config } = await load(`[generation]\nsteps = 30\nscheduler = "euler"\n`);
  assert.equal(config.generation.preset, "default");
  assert.equal(config.generation.steps, 30);
  assert.equal(config.generation.scheduler, "euler");
  assert.deepEqual(config.lora.files, []);
});

Deno.test('vae_decoder = "tiny": the tiny decoder path resolves under the root and is required', async () => {
  const { dir, config } = await load(`[models]\nvae_decoder = "tiny"\n`);
  assert.equal(config.models.vaeDecoder, "tiny");
  assert.equal(config.models.tinyVaeDecoder, join(dir, "models", "taesd/vae_decoder/model.onnx"));
  assert.ok(needed(config).includes(config.models.tinyVaeDecoder));
  const { config: full } = await load("");
  assert.equal(full.models.vaeDecoder, "full");
  assert.ok(!needed(full).includes(full.models.tinyVaeDecoder));
});

Deno.test("bad preset and vae_decoder values are refused with the key", async () => {
  await assert.rejects(load(`[generation]\npreset = "turbo"\n`), (e) => {
    assert.ok(e instanceof ConfigError);
    assert.match(e.message, /generation\.preset/);
    return true;
  });
  await assert.rejects(load(`[models]\nvae_decoder = "taesd"\n`), /models\.vae_decoder/);
  await assert.rejects(load(`[models]\nlcm_lora = "x.bin"\n`), /models\.lcm_lora/);
});
