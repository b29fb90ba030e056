/**
 * The fast preset end to end: the real program over real stdio with
 * `[generation] preset = "fast"` (a built LCM-LoRA stand-in in kohya layout,
 * locked like any model) and the tiny VAE it brings (the built
 * TAESD-structure decoder), on a copy of the tiny set: the LoRA is merged
 * once into the on-disk cache, the next start opens the merged UNet as it
 * is, and a damaged cached copy is merged again.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { readPngText } from "../mod/image/mod.ts";
import { buildTinyLora, lockEntry, lockText, parseLock } from "../mod/model_builder/mod.ts";
import { ROOT } from "./helpers/paths.ts";
import { contents, pngs, texts } from "./helpers/results.ts";
import { connectStdio } from "./helpers/stdio_server.ts";
import { copyDir } from "./helpers/copy_dir.ts";

/** Starts the server on `config`, makes one image, returns its PNG text, the items and stderr. */
async function oneImage(config: string) {
  const session = await connectStdio(["--config", config]);
  try {
    const progress: number[] = [];
    const result = await session.client.callTool(
      { name: "generate_image", arguments: { positive_prompt: "a quick fox", size: "square_512" } },
      undefined,
      { onprogress: (p) => progress.push(p.progress) },
    );
    assert.equal(result.isError, undefined, texts(result));
    return {
      meta: readPngText(pngs(result)[0]),
      items: contents(result).map((c) => c.type),
      steps: Math.max(...progress),
      stderr: session.stderr(),
    };
  } finally {
    await session.close();
  }
}

async function mergedUnets(models: string): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(join(models, ".merged"))) {
    if (e.name.startsWith("unet-")) out.push(e.name);
  }
  return out;
}

Deno.test('preset = "fast": LCM LoRA merged once into the cache, 4 lcm steps, tiny VAE; the next start reuses the merge', async () => {
  const dir = await Deno.makeTempDir({ prefix: "sd15-fast-" });
  try {
    const fixtures = join(ROOT, "tests/fixtures/tiny");
    for (const sub of ["sd15", "taesd"]) {
      await copyDir(join(fixtures, "models", sub), join(dir, "models", sub));
    }
    const lora = buildTinyLora(41, { rank: 4, alpha: 4 });
    await Deno.mkdir(join(dir, "models/lora/lcm-lora-sdv1-5"), { recursive: true });
    await Deno.writeFile(
      join(dir, "models/lora/lcm-lora-sdv1-5/pytorch_lora_weights.safetensors"),
      lora,
    );
    const entries = parseLock(await Deno.readTextFile(join(fixtures, "models.lock")))
      .filter((e) => e.path.startsWith("sd15/") || e.path.startsWith("taesd/"));
    entries.push(lockEntry("lora", "lora/lcm-lora-sdv1-5/pytorch_lora_weights.safetensors", lora));
    await Deno.writeTextFile(join(dir, "models.lock"), lockText(entries));
    const config = join(dir, "config.toml");
    await Deno.writeTextFile(
      config,
      `[server]\ndata_dir = ${JSON.stringify(join(dir, "data"))}\n` +
        `[models]\nroot = "models"\nbase = "sd15"\n` +
        `[runtime]\nintra_op_threads = 1\ninter_op_threads = 1\n` +
        `[generation]\npreset = "fast"\n`,
    );

    const first = await oneImage(config);
    // One ImageContent, as without presets; the PNG says which preset ran.
    assert.deepEqual(first.items, ["image"]);
    assert.deepEqual(
      [first.meta.preset, first.meta.steps, first.meta.scheduler, first.meta.guidance_scale],
      ["fast", "4", "lcm", "1"],
    );
    assert.equal(first.meta.vae_decoder, "tiny");
    assert.equal(first.steps, 4);
    assert.match(first.stderr, /generation: fast preset \(lcm, 4 steps, guidance 1, tiny VAE\)/);
    assert.match(first.stderr, /merged LoRA weights into a cached copy/);
    const [cached] = await mergedUnets(join(dir, "models"));
    assert.ok(cached, "a merged UNet in models/.merged/");

    // The second start opens the cached merge: no merge, the same folder.
    const second = await oneImage(config);
    assert.doesNotMatch(second.stderr, /merged LoRA weights|blended LoRA weights/);
    assert.equal(second.meta.preset, "fast");
    assert.deepEqual(await mergedUnets(join(dir, "models")), [cached]);

    // A truncated cached copy is found and merged again.
    const weights = join(dir, "models/.merged", cached, "weights.pb");
    await Deno.truncate(weights, 10);
    const third = await oneImage(config);
    assert.match(third.stderr, /built derived model files.*wrong size/);
    assert.ok((await Deno.stat(weights)).size > 10);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
