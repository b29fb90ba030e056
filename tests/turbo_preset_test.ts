/**
 * The turbo preset end to end: the real program over real stdio with
 * `[generation] preset = "turbo"` on a copy of the tiny set, with a built
 * Hyper-SD-shaped LoRA stand-in (kohya keys, float32, as the published file)
 * locked like a download and merged once into the on-disk cache: every image
 * tool runs one TCD step (guided and inpaint through the ControlNet UNet,
 * which gets the merge too), and the PNGs and the start-up line name the
 * preset, as `/healthz` does. Then switching `preset` between fast, turbo and quality: once each
 * has run, no start merges again and `deno task models check` finds nothing to
 * download or build.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { encodePng } from "../mod/image/mod.ts";
import { startApp } from "../mod/app/mod.ts";
import { loadConfig } from "../mod/config/mod.ts";
import type { Generator } from "../mod/pipeline/types.ts";
import { layOutPresetModels } from "./helpers/fast_models.ts";
import { openTestDatabase } from "./helpers/postgres.ts";
import { writeTinyConfig } from "./helpers/tiny_config.ts";
import { modelsTask } from "./helpers/models_cli.ts";
import { callImage } from "./helpers/image_call.ts";
import { connectStdio } from "./helpers/stdio_server.ts";

/** A `w`×`h` PNG data URI from a pixel function. */
async function dataUri(w: number, h: number, f: (x: number, y: number) => number[]) {
  const data = new Uint8Array(w * h * 3);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) data.set(f(x, y), (y * w + x) * 3);
  }
  return `data:image/png;base64,${(await encodePng({ width: w, height: h, data }, {})).toBase64()}`;
}

async function mergedFolders(models: string, prefix: string): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(join(models, ".merged"))) {
    if (e.isDirectory && e.name.startsWith(prefix) && !e.name.includes(".building")) {
      out.push(e.name);
    }
  }
  return out.sort();
}

/** A config for the laid-out root with `preset`, the depth and inpaint ControlNets enabled. */
async function writeConfig(dir: string, preset: string): Promise<string> {
  const path = join(dir, `config-${preset}.toml`);
  await Deno.writeTextFile(
    path,
    `[server]\ndata_dir = ${JSON.stringify(join(dir, "data"))}\n` +
      `[models]\nroot = "models"\nbase = "sd15"\n` +
      `[runtime]\nintra_op_threads = 1\ninter_op_threads = 1\n` +
      `[generation]\npreset = "${preset}"\nmax_wait_seconds = 0\n` +
      `[controlnet.depth]\nenabled = true\n[controlnet.inpaint]\nenabled = true\n`,
  );
  return path;
}

const TURBO_META = ["turbo", "1", "tcd", "0", "1", "tiny"];
const metaOf = (m: Record<string, string>) => [
  m.preset,
  m.steps,
  m.scheduler,
  m.guidance_scale,
  m.eta,
  m.vae_decoder,
];

Deno.test('preset = "turbo": Hyper-SD LoRA merged once, one tcd step in every image tool, the preset named', async () => {
  const dir = await Deno.makeTempDir({ prefix: "sd15-turbo-" });
  try {
    await Deno.writeTextFile(
      join(dir, "models.lock"),
      await layOutPresetModels(join(dir, "models")),
    );
    const config = await writeConfig(dir, "turbo");
    const session = await connectStdio(["--config", config]);
    try {
      const client = session.client;
      const text = await callImage(client, "generate_image", {
        positive_prompt: "a quick fox",
        negative_prompt: "blurry",
        size: "square_512",
      });
      // The image, and a note that the negative prompt does nothing without CFG.
      assert.deepEqual(text.items, ["image", "text"]);
      assert.match(text.text, /negative prompt is not used: guidance_scale 0 <= 1/);
      assert.deepEqual(metaOf(text.meta), TURBO_META);
      assert.equal(text.meta.mode, "text_to_image");
      assert.equal(text.steps, 1, "one UNet call");

      const photo = await dataUri(
        200,
        150,
        (x, y) => [(x * 7) % 251, (y * 5) % 251, (x + y) % 251],
      );
      const guided = await callImage(client, "generate_guided_image", {
        positive_prompt: "a statue",
        control_mode: "depth",
        input_image: photo,
      });
      assert.equal(guided.meta.mode, "guided_image");
      assert.equal(guided.steps, 1);
      const square = await dataUri(512, 512, (x, y) => [x % 256, y % 256, (x + y) % 256]);
      const mask = await dataUri(512, 512, (x) => (x < 256 ? [0, 0, 0] : [255, 255, 255]));
      const inpaint = await callImage(client, "inpaint_image", {
        positive_prompt: "a vase",
        input_image: square,
        mask_image: mask,
        size: "square_512",
      });
      assert.equal(inpaint.meta.mode, "inpaint_image");
      assert.equal(inpaint.steps, 1);
      // Image-to-image: TCD's grid starts at the strength (moderate 0.5: one step from t = 499).
      const transform = await callImage(client, "transform_image", {
        positive_prompt: "a quick fox, oil painting",
        input_image: photo,
        change: "moderate",
      });
      assert.equal(transform.meta.mode, "image_to_image");
      assert.equal(transform.steps, 1);
      const upscale = await callImage(client, "upscale_image", { input_image: photo });
      assert.equal(upscale.meta.mode, "upscale_image");
      assert.equal(upscale.meta.size, "landscape_1024");
      assert.equal(upscale.steps, 6, "one step on each of six tiles");
      for (const made of [guided, inpaint, transform, upscale]) {
        assert.deepEqual(metaOf(made.meta), TURBO_META, made.meta.mode);
      }
    } finally {
      await session.close();
    }
    const stderr = session.stderr();
    assert.match(
      stderr,
      /generation: turbo preset \(tcd, 1 step, eta 1, guidance 0, tiny VAE\)/,
    );
    // The plain UNet and the ControlNet UNet each got the Hyper-SD LoRA merged, once.
    const merges = stderr.match(/merged LoRA weights into a cached copy/g) ?? [];
    assert.equal(merges.length, 2, stderr);
    assert.equal((await mergedFolders(join(dir, "models"), "unet-")).length, 1);
    assert.equal((await mergedFolders(join(dir, "models"), "controlnet_unet-")).length, 1);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("switching preset between fast, turbo and quality: once each has run, nothing is merged or downloaded again", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sd15-presets-" });
  try {
    await Deno.writeTextFile(
      join(dir, "models.lock"),
      await layOutPresetModels(join(dir, "models")),
    );
    const configs: Record<string, string> = {};
    for (const preset of ["fast", "turbo", "quality"]) {
      configs[preset] = await writeConfig(dir, preset);
    }
    const run = async (preset: string) => {
      const session = await connectStdio(["--config", configs[preset]]);
      try {
        const made = await callImage(session.client, "generate_image", {
          positive_prompt: `a ${preset} fox`,
        });
        assert.equal(made.meta.preset, preset);
      } finally {
        await session.close();
      }
      return session.stderr();
    };
    const models = join(dir, "models");
    // First round: fast and turbo merge their LoRA (UNet and ControlNet UNet); quality opens the base set.
    const first = {
      fast: await run("fast"),
      turbo: await run("turbo"),
      quality: await run("quality"),
    };
    assert.match(first.fast, /merged LoRA weights into a cached copy/);
    assert.match(first.turbo, /merged LoRA weights into a cached copy/);
    assert.doesNotMatch(first.quality, /merged LoRA weights/);
    const unets = await mergedFolders(models, "unet-");
    const controlnetUnets = await mergedFolders(models, "controlnet_unet-");
    assert.equal(unets.length, 2, "one cached merge per LoRA");
    assert.equal(controlnetUnets.length, 2);
    // Second round, in another order: no merge, no derived file built, the same cache.
    for (const preset of ["turbo", "quality", "fast", "turbo"]) {
      const stderr = await run(preset);
      assert.doesNotMatch(stderr, /merged LoRA weights|blended LoRA weights/, preset);
      assert.doesNotMatch(stderr, /built derived model files/, preset);
    }
    assert.deepEqual(await mergedFolders(models, "unet-"), unets);
    assert.deepEqual(await mergedFolders(models, "controlnet_unet-"), controlnetUnets);
    // `deno task models check` on each preset: every file ok, every merge ok, nothing to fetch.
    for (const [preset, config] of Object.entries(configs)) {
      const checked = await modelsTask(dir, ["check", "--config", config]);
      assert.equal(checked.code, 0, `${preset}:\n${checked.stdout}\n${checked.stderr}`);
      assert.doesNotMatch(checked.stdout, /missing|not built|stale|wrong/, preset);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("http: /healthz names the turbo preset and its sampling (eta included), like the others", async () => {
  const tdb = await openTestDatabase("turbo_healthz");
  const temp = await writeTinyConfig(`[generation]\npreset = "turbo"\nsteps = 2\n`);
  // The health answer comes from the resolved config; a stand-in engine keeps model files out of it.
  const generator: Generator = {
    generate: () => Promise.reject(new Error("not used")),
    close: () => Promise.resolve(),
  };
  try {
    const config = await loadConfig({
      path: temp.path,
      overrides: { transport: "http" },
      env: { DATABASE_URL: tdb.url },
    });
    const app = await startApp(config, { generator });
    try {
      const body = await (await fetch(`http://127.0.0.1:${app.http!.port}/healthz`)).json();
      assert.equal(body.status, "ok");
      assert.deepEqual(body.generation, {
        preset: "turbo",
        chosenBy: "config",
        steps: 2,
        scheduler: "tcd",
        guidanceScale: 0,
        eta: 1,
        vaeDecoder: "tiny",
      });
    } finally {
      await app.shutdown();
    }
  } finally {
    await tdb.close();
    await temp.remove();
  }
});
