/**
 * One image-to-image or upscale scenario of `deno task bench --full`, in its
 * own process like `full_run.ts` (whose report shape it prints): the engine
 * in-process on the full-size set with the production configuration path
 * (a `config.toml` → `loadConfig` → `engineConfigOf`, so the VAE encoder is
 * opened and rewritten as the server does), every `session.run`
 * timed by model (the rewritten VAE encoder included), and the stages of the
 * image path outside the sessions timed on their own.
 *
 * ```sh
 * deno run -P=test bench/full_image_run.ts --root DIR --mode transform|upscale
 *   [--preset default|fast] [--vae full|tiny] [--steps 25] [--strength 0.5] [--runs 1]
 * ```
 *
 * `transform` runs `image_to_image` on a 512×512 picture; `upscale` enlarges
 * it to 1024×1024 with the PIL-exact Lanczos (as `upscale_image` does) and
 * refines the 9 tiles. `--preset fast` is the fast preset's sampling (lcm, 4
 * steps, no CFG) without the LoRA merge, as the text-to-image fast scenarios
 * measure it.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { join } from "node:path";
import { loadConfig } from "../mod/config/mod.ts";
import { decodeImageInput, encodePng, toRgbImage } from "../mod/image/mod.ts";
import { createSessionFromBytes } from "../mod/onnx/mod.ts";
import { createEngine, engineConfigOf, type GenerationRequest } from "../mod/pipeline/mod.ts";
import { testPicture } from "../mod/pipeline/_testing.ts";
import { TileBlender, tileGrid } from "../mod/pipeline/upscale.ts";
import { procMemory } from "./proc_memory.ts";
import { type RunReport, timedSession } from "./full_run.ts";
import { createSession } from "../mod/onnx/mod.ts";

/** What an image scenario reports beyond {@link RunReport}. */
export interface ImageRunReport extends RunReport {
  /** Tiles refined per image (1 for a transform). */
  tiles: number;
  /** The progress total the engine reported (UNet calls over all tiles). */
  progressTotal: number;
  /** The strength the run used. */
  strength: number;
}

async function main(): Promise<void> {
  const { values: v } = parseArgs({
    args: Deno.args,
    options: {
      root: { type: "string" },
      mode: { type: "string", default: "transform" },
      preset: { type: "string", default: "default" },
      vae: { type: "string", default: "full" },
      steps: { type: "string", default: "25" },
      strength: { type: "string" },
      runs: { type: "string", default: "1" },
    },
  });
  const root = v.root!;
  const upscale = v.mode === "upscale";
  const fast = v.preset === "fast";
  const strength = Number(v.strength ?? (upscale ? 0.3 : 0.5));
  // `custom`: the sampling written here, and no LoRA: the fast preset's UNet calls cost what the
  // merged LCM UNet's do (the same graph), as in the other fast scenarios.
  const sampling = 'preset = "custom"\n' +
    (fast
      ? `scheduler = "lcm"\nsteps = 4\nguidance_scale = 1.0`
      : `scheduler = "pndm"\nsteps = ${Number(v.steps)}\nguidance_scale = 7.5`);
  const dir = await Deno.makeTempDir({ prefix: "sd15-bench-image-" });
  const configPath = join(dir, "config.toml");
  await Deno.writeTextFile(
    configPath,
    `[models]\nroot = ${JSON.stringify(root)}\nlock = ${
      JSON.stringify(join(root, "models.lock"))
    }\n` +
      `base = "sd15"\nvae_decoder = ${JSON.stringify(v.vae)}\n[generation]\n${sampling}\n` +
      `[transform]\nsubtle = ${Math.min(strength, 0.3)}\nmoderate = ${strength}\n` +
      `strong = ${Math.max(strength, 0.75)}\n[upscale]\nstrength = ${strength}\n`,
  );
  const config = engineConfigOf(await loadConfig({ path: configPath, env: {} }));
  await Deno.remove(dir, { recursive: true });
  const runs: Record<string, number[]> = {};
  const active = { on: false, sum: 0 };
  const t0 = performance.now();
  const engine = await createEngine(config, {
    openSession: async (path, o) =>
      timedSession(await createSession(path, o), o.label ?? path, runs, active),
    openBytes: async (m, o) =>
      timedSession(
        await createSessionFromBytes(m.bytes, m.externalData, o),
        o.label ?? m.path,
        runs,
        active,
      ),
  });
  const loadMs = performance.now() - t0;
  const rssAfterLoad = procMemory().rss;

  const stages: Record<string, number[]> = {};
  const time = async <T>(name: string, fn: () => Promise<T> | T): Promise<T> => {
    const s = performance.now();
    const out = await fn();
    (stages[name] ??= []).push(performance.now() - s);
    return out;
  };
  // Gradients and a bright square (the pipeline tests' picture); content does not change the cost.
  const side = 512;
  const picture = testPicture(side, side);
  const png = (await encodePng(picture, {})).toBase64();
  const out = upscale ? 1024 : side;
  const input = await time(
    upscale ? "input decode + Lanczos 512 → 1024" : "input decode",
    async () => toRgbImage(await decodeImageInput("input_image", png), out, out),
  );
  const request: GenerationRequest = {
    mode: upscale ? "upscale_image" : "image_to_image",
    positive: "a lighthouse on a cliff at sunset, detailed, dramatic sky",
    negative: "blurry, low quality",
    width: out,
    height: out,
    seed: 42,
    image: input,
    strength,
  };
  const generations: RunReport["generations"] = [];
  let progressTotal = 0;
  let image;
  for (let i = 0; i < Number(v.runs); i++) {
    active.on = true;
    active.sum = 0;
    const s = performance.now();
    image = (await engine.generate(request, { onProgress: (_, total) => progressTotal = total }))
      .image;
    generations.push({ totalMs: performance.now() - s, sessionMs: active.sum });
    active.on = false;
  }
  const rssAfterRuns = procMemory().rss;
  await engine.release();

  const grid = tileGrid(out, out);
  for (let k = 0; k < 3; k++) {
    await time("PNG encode", () => encodePng(image!, { prompt: request.positive }));
    if (upscale) {
      await time("tile blend (all tiles)", () => {
        const blender = new TileBlender(grid);
        const tile = { width: 512, height: 512, data: new Uint8Array(512 * 512 * 3).fill(k) };
        grid.tiles.forEach((_, i) => blender.add(i, tile));
        return blender.result();
      });
    }
  }
  const report: ImageRunReport = {
    options: { ...v, strength, steps: config.generation.steps },
    loadMs,
    rssAfterLoad,
    peakRss: procMemory().peak,
    rssAfterRuns,
    generations,
    runs,
    stages,
    tiles: upscale ? grid.tiles.length : 1,
    progressTotal,
    strength,
  };
  console.log(JSON.stringify(report));
}

if (import.meta.main) await main();
