/**
 * The fast preset end to end: the real program over real stdio with
 * `[generation] preset = "fast"` on a copy of the tiny set, with a built
 * LCM-LoRA stand-in (kohya layout) and TAESD's decoder weights
 * (`taesd_decoder.safetensors`, random weights with the real keys), each
 * locked like a download: at the first start the real converter derives
 * the ONNX tiny VAE decoder and the LoRA is merged once into the on-disk
 * cache; the next start opens both as they are, and a damaged cached copy
 * is merged again.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { encodePng } from "../mod/image/mod.ts";
import type { Client } from "../mod/mcp/client_sdk.ts";
import { TAESD_CONVERTER_VERSION } from "../mod/convert/mod.ts";
import { readDerivedRecord } from "../mod/models/mod.ts";
import { layOutFastModels } from "./helpers/fast_models.ts";
import { callImage } from "./helpers/image_call.ts";
import { connectStdio } from "./helpers/stdio_server.ts";

/** Starts the server on `config`, makes one image, returns its PNG text, the items and stderr. */
async function oneImage(config: string, more?: (client: Client) => Promise<void>) {
  const session = await connectStdio(["--config", config]);
  try {
    const made = await callImage(session.client, "generate_image", {
      positive_prompt: "a quick fox",
      size: "square_512",
    });
    await more?.(session.client);
    return { ...made, stderr: session.stderr() };
  } finally {
    await session.close();
  }
}

/** A 200×150 PNG data URI (4:3: upscale_image picks 1024×768, six tiles). */
async function photo(): Promise<string> {
  const data = new Uint8Array(200 * 150 * 3).map((_, i) => (i * 7) % 251);
  return `data:image/png;base64,${
    (await encodePng({ width: 200, height: 150, data }, {})).toBase64()
  }`;
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
    await Deno.writeTextFile(join(dir, "models.lock"), await layOutFastModels(join(dir, "models")));
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
    // lcm reads no η, so none is written.
    assert.equal(first.meta.eta, undefined);
    assert.equal(first.steps, 4);
    assert.match(first.stderr, /generation: fast preset \(lcm, 4 steps, guidance 1, tiny VAE\)/);
    assert.match(first.stderr, /merged LoRA weights into a cached copy/);
    // The tiny VAE is TAESD's decoder, converted here by the real converter.
    const taesd = await readDerivedRecord(join(dir, "models/taesd/vae_decoder"));
    assert.equal(taesd?.recipe.converter, "taesd");
    assert.equal(taesd?.recipe.version, TAESD_CONVERTER_VERSION);
    assert.deepEqual(taesd?.files.map((f) => f.name), ["model.onnx"]);
    const [cached] = await mergedUnets(join(dir, "models"));
    assert.ok(cached, "a merged UNet in models/.merged/");

    // The second start opens the cached merge: no merge, the same folder. The image
    // modes run the fast preset too: the LCM grid [999, 759, 499, 259] cut by the strength
    // (moderate 0.6: the last 2 steps; each upscale tile at 0.3: the last one) and say so.
    const second = await oneImage(config, async (client) => {
      const input = await photo();
      const transform = await callImage(client, "transform_image", {
        positive_prompt: "a quick fox, oil painting",
        input_image: input,
        change: "moderate",
      });
      assert.deepEqual(transform.items, ["image"]);
      assert.equal(transform.meta.mode, "image_to_image");
      assert.equal(transform.steps, 2);
      const upscale = await callImage(client, "upscale_image", { input_image: input });
      assert.equal(upscale.meta.mode, "upscale_image");
      assert.equal(upscale.meta.size, "landscape_1024");
      assert.equal(upscale.steps, 6, "one step on each of six tiles");
      for (const meta of [transform.meta, upscale.meta]) {
        assert.deepEqual(
          [meta.preset, meta.steps, meta.scheduler, meta.guidance_scale, meta.vae_decoder],
          ["fast", "4", "lcm", "1", "tiny"],
        );
      }
    });
    assert.doesNotMatch(second.stderr, /merged LoRA weights|blended LoRA weights/);
    assert.doesNotMatch(second.stderr, /built derived model files/, "the TAESD decoder is kept");
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
