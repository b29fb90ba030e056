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
const TURBO_LORA = "lora/hyper-sd/Hyper-SD15-1step-lora.safetensors";

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
  await assert.rejects(load(`[generation]\npreset = "hyper"\n`), (e) => {
    assert.ok(e instanceof ConfigError);
    assert.match(e.message, /generation\.preset/);
    return true;
  });
  await assert.rejects(load(`[models]\nvae_decoder = "taesd"\n`), /models\.vae_decoder/);
  await assert.rejects(load(`[models]\nlcm_lora = "x.bin"\n`), /models\.lcm_lora/);
  await assert.rejects(load(`[models]\nturbo_lora = "x.bin"\n`), /models\.turbo_lora/);
  await assert.rejects(load(`[generation]\neta = 1.5\n`), /generation\.eta/);
});

Deno.test('preset = "turbo": the Hyper-SD LoRA, tcd 1 step, eta 1, no CFG, tiny VAE; steps and eta may be written', async () => {
  const { dir, config } = await load(`[generation]\npreset = "turbo"\n`);
  assert.equal(config.generation.preset, "turbo");
  assert.equal(config.generation.presetSource, "config");
  assert.deepEqual(
    [
      config.generation.scheduler,
      config.generation.steps,
      config.generation.guidanceScale,
      config.generation.eta,
    ],
    ["tcd", 1, 0, 1],
  );
  assert.equal(config.models.vaeDecoder, "tiny");
  assert.equal(config.models.turboLora, join(dir, "models", TURBO_LORA));
  assert.deepEqual(config.lora.files, [{ path: config.models.turboLora, weight: 1 }]);
  assert.ok(needed(config).includes(config.models.turboLora));
  assert.ok(!needed(config).includes(config.models.lcmLora));
  assert.ok(needed(config).includes(config.models.tinyVaeDecoder));
  const summary = samplingSummary(config);
  assert.deepEqual(summary, {
    preset: "turbo",
    chosenBy: "config",
    steps: 1,
    scheduler: "tcd",
    guidanceScale: 0,
    eta: 1,
    vaeDecoder: "tiny",
  });
  assert.equal(samplingText(summary), "turbo preset (tcd, 1 step, eta 1, guidance 0, tiny VAE)");

  const { config: two } = await load(
    `[generation]\npreset = "turbo"\nsteps = 2\neta = 0.3\nscheduler = "tcd"\n` +
      `[models]\nturbo_lora = "lora/my-hyper.safetensors"\n`,
  );
  assert.deepEqual([two.generation.steps, two.generation.eta], [2, 0.3]);
  assert.equal(
    samplingText(samplingSummary(two)),
    "turbo preset (tcd, 2 steps, eta 0.3, guidance 0, tiny VAE)",
  );
  assert.match(two.lora.files[0].path, /models\/lora\/my-hyper\.safetensors$/);
  // The other presets keep eta 0 and do not show it; a LoRA file a user adds comes first.
  const { config: fast } = await load(
    `[generation]\npreset = "fast"\n[lora]\nfiles = [{ path = "lora/style.safetensors" }]\n`,
  );
  assert.equal(fast.generation.eta, 0);
  assert.equal(samplingSummary(fast).eta, undefined);
  const { config: styled } = await load(
    `[generation]\npreset = "turbo"\n[lora]\nfiles = [{ path = "lora/style.safetensors" }]\n`,
  );
  assert.deepEqual(styled.lora.files.map((f) => f.path.split("/models/")[1]), [
    "lora/style.safetensors",
    TURBO_LORA,
  ]);
});

Deno.test("the turbo preset refuses another scheduler and says what to do; auto stays fast on the CPU", async () => {
  await assert.rejects(load(`[generation]\npreset = "turbo"\nscheduler = "lcm"\n`), (e) => {
    assert.ok(e instanceof ConfigError);
    assert.match(e.message, /generation\.scheduler = "lcm" does not go with the turbo preset/);
    assert.match(e.message, /Hyper-SD LoRA samples with the tcd scheduler/);
    assert.match(e.message, /set generation\.preset = "quality" or "custom"/);
    return true;
  });
  const { config } = await load("");
  assert.equal(config.generation.preset, "fast");
  // tcd is a scheduler like the others under "custom" (its own eta default there is the pipeline's 0).
  const { config: custom } = await load(
    `[generation]\npreset = "custom"\nscheduler = "tcd"\nsteps = 4\nguidance_scale = 1\n`,
  );
  assert.deepEqual([custom.generation.scheduler, custom.generation.eta], ["tcd", 0]);
  assert.deepEqual(custom.lora.files, []);
});
