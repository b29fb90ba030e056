import assert from "node:assert/strict";
import { join } from "node:path";
import { type ModelPathsConfig, neededFiles } from "../models/mod.ts";
import { ConfigError, loadConfig, samplingSummary, samplingText } from "./mod.ts";

/** The absolute paths the model check verifies for `config` (lock entries play no part here). */
const needed = (config: ModelPathsConfig) => neededFiles(config, []).files.map((f) => f.abs);

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

const LCM_LORA = "lora/lcm-lora-sdv1-5/pytorch_lora_weights.safetensors";

Deno.test('preset = "auto" (the default): fast on the CPU provider, quality on GPU providers', async () => {
  const { dir, config: cpu } = await load("");
  assert.equal(cpu.generation.preset, "fast");
  assert.equal(cpu.generation.presetSource, "auto");
  assert.deepEqual(
    [cpu.generation.scheduler, cpu.generation.steps, cpu.generation.guidanceScale],
    ["lcm", 4, 1],
  );
  assert.equal(cpu.models.vaeDecoder, "tiny");
  assert.deepEqual(cpu.lora.files, [{ path: join(dir, "models", LCM_LORA), weight: 1 }]);
  // The model check then requires the LCM LoRA and the tiny VAE like any configured file.
  assert.ok(needed(cpu).includes(cpu.models.lcmLora));
  assert.ok(needed(cpu).includes(cpu.models.tinyVaeDecoder));
  assert.equal(
    samplingText(samplingSummary(cpu)),
    "fast preset (lcm, 4 steps, guidance 1, tiny VAE)",
  );
  for (const provider of ["cuda", "webgpu"]) {
    const { config: gpu } = await load(`[runtime]\nexecution_provider = "${provider}"\n`);
    assert.equal(gpu.generation.preset, "quality", provider);
    assert.deepEqual(
      [gpu.generation.scheduler, gpu.generation.steps, gpu.generation.guidanceScale],
      ["pndm", 25, 7.5],
    );
    assert.equal(gpu.models.vaeDecoder, "full");
    assert.deepEqual(gpu.lora.files, []);
    assert.ok(!needed(gpu).includes(gpu.models.tinyVaeDecoder));
  }
});

Deno.test("a preset the config names wins over the provider; keys written in the config win over the preset", async () => {
  const { config: quality } = await load(`[generation]\npreset = "quality"\n`);
  assert.equal(quality.generation.preset, "quality");
  assert.equal(quality.generation.presetSource, "config");
  assert.deepEqual([quality.generation.scheduler, quality.generation.steps], ["pndm", 25]);
  assert.equal(quality.models.vaeDecoder, "full");
  const { config: fastGpu } = await load(
    `[runtime]\nexecution_provider = "cuda"\n[generation]\npreset = "fast"\nsteps = 6\n` +
      `[models]\nvae_decoder = "full"\n`,
  );
  assert.equal(fastGpu.generation.preset, "fast");
  assert.deepEqual([fastGpu.generation.scheduler, fastGpu.generation.steps], ["lcm", 6]);
  assert.equal(fastGpu.models.vaeDecoder, "full");
  const { dir, config: style } = await load(
    `[generation]\npreset = "fast"\n[lora]\nfiles = [{ path = "lora/style.safetensors", weight = 0.5 }]\n`,
  );
  // The LCM LoRA comes after the configured ones.
  assert.deepEqual(style.lora.files.map((f) => f.path), [
    join(dir, "models", "lora/style.safetensors"),
    join(dir, "models", LCM_LORA),
  ]);
});

Deno.test('"custom" and the old "default" keep the configured sampling with quality\'s values for the rest', async () => {
  for (const name of ["custom", "default"]) {
    const { config } = await load(
      `[generation]\npreset = "${name}"\nsteps = 30\nscheduler = "euler"\n`,
    );
    assert.equal(config.generation.preset, "custom", name);
    assert.deepEqual(
      [config.generation.scheduler, config.generation.steps, config.generation.guidanceScale],
      ["euler", 30, 7.5],
    );
    assert.equal(config.models.vaeDecoder, "full");
    assert.deepEqual(config.lora.files, []);
  }
});

Deno.test("the fast preset refuses another scheduler, with a message that says what to do", async () => {
  // An older config copied with every key: scheduler = "pndm" under the new CPU default.
  await assert.rejects(load(`[generation]\nsteps = 25\nscheduler = "pndm"\n`), (e) => {
    assert.ok(e instanceof ConfigError);
    assert.match(e.message, /generation\.scheduler = "pndm" does not go with the fast preset/);
    assert.match(e.message, /fast on the cpu provider/);
    assert.match(e.message, /set generation\.preset = "quality" or "custom"/);
    return true;
  });
  await assert.rejects(load(`[generation]\npreset = "fast"\nscheduler = "euler"\n`), ConfigError);
  const { config } = await load(`[generation]\npreset = "fast"\nscheduler = "lcm"\n`);
  assert.equal(config.generation.scheduler, "lcm");
});

Deno.test('vae_decoder = "tiny": the tiny decoder path resolves under the root and is required', async () => {
  const { dir, config } = await load(
    `[generation]\npreset = "quality"\n[models]\nvae_decoder = "tiny"\n`,
  );
  assert.equal(config.models.vaeDecoder, "tiny");
  assert.equal(config.models.tinyVaeDecoder, join(dir, "models", "taesd/vae_decoder/model.onnx"));
  assert.ok(needed(config).includes(config.models.tinyVaeDecoder));
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
