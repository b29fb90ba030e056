/**
 * Image-to-image and upscaling through the engine on the tiny models: the
 * generator's draws in diffusers' order, the cut schedule fed to the UNet,
 * strength 1 against text-to-image, the LCM pipeline, determinism, tiles,
 * progress and cancellation.
 */

import { deepStrictEqual, notDeepStrictEqual, ok, rejects, strictEqual } from "node:assert";
import { join } from "node:path";
import onnx from "onnx-proto";
import { ToolError } from "../mcp/tool.ts";
import {
  createSessionFromBytes,
  exposeLatentParameters,
  LATENT_PARAMETERS_REWRITE,
  Tensor,
} from "../onnx/mod.ts";
import { TorchGenerator } from "../random/mod.ts";
import { createScheduler, type SchedulerName } from "../schedulers/mod.ts";
import {
  differingBytes,
  type RecordedRun,
  recordingOpener,
  testPicture,
  tinyConfig,
  type TinyConfigOptions,
  tinyModels,
} from "./_testing.ts";
import { createEngine, type EngineOptions } from "./engine.ts";
import type { EngineConfig } from "./engine_config.ts";
import { defaultBytesOpener, openVaeEncoder } from "./load_models.ts";
import type { BytesOpener } from "./model_session.ts";
import { CancelledError } from "./errors.ts";
import type { GenerationRequest, RgbImage } from "./types.ts";
import { cropTile, TileBlender, tileGrid } from "./upscale.ts";

const root = await tinyModels("image-to-image");
const W = 64;
const H = 48;
const picture = testPicture(W, H);

function config(options: TinyConfigOptions = {}): EngineConfig {
  return { ...tinyConfig(root, options), imageToImage: { strengths: [] } };
}

type Transform = Extract<GenerationRequest, { mode: "image_to_image" }>;

function transform(over: Partial<Transform> = {}): Transform {
  return {
    mode: "image_to_image",
    positive: "a watercolour landscape",
    negative: "blurry",
    width: W,
    height: H,
    seed: 11,
    image: picture,
    strength: 0.5,
    ...over,
  };
}

function upscale(image: RgbImage, strength = 0.5): GenerationRequest {
  return {
    ...transform({ strength }),
    mode: "upscale_image",
    width: image.width,
    height: image.height,
    image,
  };
}

const unetRuns = (runs: RecordedRun[]) => runs.filter((r) => r.label === "unet");
const timestepsFed = (runs: RecordedRun[]) =>
  unetRuns(runs).map((r) => {
    const t = r.feeds.timestep;
    return t.data ? t.data[0] : t.ints![0];
  });

async function withEngine(
  c: EngineConfig,
  fn: (
    engine: Awaited<ReturnType<typeof createEngine>>,
    runs: RecordedRun[],
  ) => Promise<void>,
): Promise<void> {
  const { open, openBytes, runs } = recordingOpener();
  const options: EngineOptions = { openSession: open, openBytes };
  const engine = await createEngine(c, options);
  try {
    await fn(engine, runs);
  } finally {
    await engine.release();
  }
}

/** `vae.config.scaling_factor · (mean + std·ε)` from the rewritten encoder, ε drawn from `g`. */
async function imageLatents(
  set: string,
  image: RgbImage,
  g: TorchGenerator,
): Promise<Float32Array> {
  const found = exposeLatentParameters(
    await Deno.readFile(join(root, set, "vae_encoder/model.onnx")),
  );
  if (found.kind !== "rewritten") throw new Error(found.kind);
  const session = await createSessionFromBytes(found.model);
  const plane = image.width * image.height;
  const pixels = new Float32Array(3 * plane);
  for (let p = 0; p < plane; p++) {
    for (let c = 0; c < 3; c++) pixels[c * plane + p] = 2 * (image.data[p * 3 + c] / 255) - 1;
  }
  const out = await session.run({
    sample: new Tensor("float32", pixels, [1, 3, image.height, image.width]),
  });
  await session.release();
  const params = out.latent_parameters.data as Float32Array;
  const n = params.length / 2;
  const eps = g.randn(n);
  return Float32Array.from(
    { length: n },
    (_, i) => (params[i] + Math.exp(0.5 * params[n + i]) * eps[i]) * 0.18215,
  );
}

Deno.test("transform: deterministic per seed; seed, prompt and strength change the pixels", async () => {
  await withEngine(config(), async (engine) => {
    strictEqual(engine.info.vaeEncoder, "rewritten", "the in-graph sampler was removed");
    const a = await engine.generate(transform());
    strictEqual(a.image.width, W);
    strictEqual(a.image.height, H);
    deepStrictEqual((await engine.generate(transform())).image.data, a.image.data);
    ok(differingBytes((await engine.generate(transform({ seed: 12 }))).image, a.image) > 50);
    ok(
      differingBytes((await engine.generate(transform({ positive: "a city" }))).image, a.image) >
        50,
    );
    ok(differingBytes((await engine.generate(transform({ strength: 0.9 }))).image, a.image) > 50);
    const other = testPicture(W, H, 1);
    ok(differingBytes((await engine.generate(transform({ image: other }))).image, a.image) > 50);
  });
});

Deno.test("transform: image sample then noise from the generator, add_noise at the first kept timestep", async () => {
  for (const scheduler of ["pndm", "euler"] as const) {
    await withEngine(config({ generation: { steps: 4, scheduler } }), async (engine, runs) => {
      const progress: Array<[number, number]> = [];
      await engine.generate(transform({ strength: 0.5 }), {
        onProgress: (s, t) => progress.push([s, t]),
      });
      const s = createScheduler(
        scheduler,
        JSON.parse(
          await Deno.readTextFile(join(root, "sd15/scheduler/scheduler_config.json")),
        ),
      );
      s.setTimesteps(4);
      // get_timesteps: int(4 · 0.5) = 2, t_start = 2.
      const kept = s.timesteps.slice(2);
      deepStrictEqual(timestepsFed(runs), kept.map(Math.fround), scheduler);
      deepStrictEqual(progress.map(([, t]) => t), kept.map(() => kept.length));
      const g = new TorchGenerator(11);
      const latents = await imageLatents("sd15", picture, g);
      const noise = g.randn(latents.length);
      const start = s.scaleModelInput(s.addNoise(latents, noise, kept[0]), kept[0]);
      const fed = unetRuns(runs)[0].feeds.sample;
      deepStrictEqual(fed.dims, [2, 4, H / 8, W / 8], "CFG batch");
      for (let i = 0; i < start.length; i++) {
        ok(Math.abs(fed.data![i] - start[i]) < 1e-5, `${scheduler} start latent ${i}`);
        strictEqual(fed.data![start.length + i], fed.data![i], "both halves of the batch");
      }
    });
  }
});

Deno.test("transform at strength 1 runs text-to-image's schedule, for every scheduler", async () => {
  const schedulers: SchedulerName[] = ["pndm", "ddim", "euler", "euler_a", "dpmpp_2m", "lcm"];
  for (const scheduler of schedulers) {
    await withEngine(config({ generation: { steps: 3, scheduler } }), async (engine, runs) => {
      const t2iProgress: number[] = [];
      const { image: _, strength: __, ...base } = transform();
      await engine.generate({ ...base, mode: "text_to_image" }, {
        onProgress: (_, t) => t2iProgress.push(t),
      });
      const textToImage = timestepsFed(runs);
      runs.length = 0;
      const i2iProgress: number[] = [];
      await engine.generate(transform({ strength: 1 }), {
        onProgress: (_, t) => i2iProgress.push(t),
      });
      deepStrictEqual(timestepsFed(runs), textToImage, scheduler);
      deepStrictEqual(i2iProgress, t2iProgress, `${scheduler}: the same progress total`);
    });
  }
});

Deno.test("transform on an LCM-distilled UNet: LatentConsistencyModelImg2ImgPipeline's schedule", async () => {
  const c = config({
    set: "sd15-lcm",
    generation: { steps: 4, scheduler: "lcm", guidanceScale: 8 },
  });
  await withEngine(c, async (engine, runs) => {
    const a = await engine.generate(transform({ strength: 0.5 }));
    // set_timesteps(4, strength=0.5): all 4 steps on the grid of int(50 · 0.5) timesteps.
    deepStrictEqual(timestepsFed(runs), [499, 379, 259, 139]);
    strictEqual(unetRuns(runs)[0].feeds.sample.dims[0], 1, "no CFG batch");
    strictEqual(engine.info.vaeEncoder, "rewritten", "an Optimum ≤ 1.22 encoder (Split chunk)");
    deepStrictEqual((await engine.generate(transform({ strength: 0.5 }))).image.data, a.image.data);
  });
});

Deno.test("transform: cancelled at a step boundary; the engine serves the next request", async () => {
  await withEngine(config({ generation: { steps: 8 } }), async (engine, runs) => {
    let cancel = false;
    await rejects(
      engine.generate(transform({ strength: 0.75 }), {
        isCancelled: () => cancel,
        onProgress: (s) => cancel = s === 2,
      }),
      (e: Error) => e instanceof CancelledError && /before step 3 of 7/.test(e.message),
    );
    strictEqual(unetRuns(runs).length, 2);
    strictEqual(runs.some((r) => r.label === "vae_decoder"), false);
    strictEqual((await engine.generate(transform())).image.width, W);
  });
});

Deno.test("upscale: 9 tiles, one progress total, each tile the transform of its crop with seed + i", async () => {
  const big = testPicture(1024, 1024);
  await withEngine(config({ generation: { steps: 3 } }), async (engine) => {
    const progress: Array<[number, number]> = [];
    const up = await engine.generate(
      upscale(big),
      { onProgress: (s, t) => progress.push([s, t]) },
    );
    strictEqual(up.image.width, 1024);
    // int(3 · 0.5) = 1, so PLMS keeps 2 UNet calls per tile; 9 tiles.
    deepStrictEqual(progress, Array.from({ length: 18 }, (_, i) => [i + 1, 18]));
    const grid = tileGrid(1024, 1024);
    const blender = new TileBlender(grid);
    for (let i = 0; i < grid.tiles.length; i++) {
      const tile = await engine.generate(
        transform({ width: 512, height: 512, image: cropTile(big, grid.tiles[i]), seed: 11 + i }),
      );
      blender.add(i, tile.image);
    }
    deepStrictEqual(up.image.data, blender.result().data);
    notDeepStrictEqual(up.image.data.slice(0, 3000), big.data.slice(0, 3000));
  });
});

Deno.test("upscale: cancelled mid-way, in tile 2, with nothing decoded after", async () => {
  const big = testPicture(1024, 768);
  await withEngine(config({ generation: { steps: 3 } }), async (engine, runs) => {
    let cancel = false;
    const seen: number[] = [];
    await rejects(
      engine.generate(
        upscale(big),
        {
          isCancelled: () => cancel,
          onProgress: (s, t) => {
            seen.push(s);
            strictEqual(t, 12, "6 tiles × 2 calls");
            cancel = s === 3;
          },
        },
      ),
      (e: Error) =>
        e instanceof CancelledError && /before step 2 of 2 of tile 2 of 6/.test(e.message),
    );
    deepStrictEqual(seen, [1, 2, 3]);
    strictEqual(runs.filter((r) => r.label === "vae_decoder").length, 1, "tile 1 only");
    strictEqual(runs.filter((r) => r.label === "vae_encoder").length, 2);
  });
});

Deno.test("an engine started without image-to-image refuses it as a configuration error", async () => {
  const engine = await createEngine(tinyConfig(root));
  try {
    strictEqual(engine.info.vaeEncoder, null);
    await rejects(
      engine.generate(transform()),
      (e: ToolError) => e instanceof ToolError && e.category === "configuration",
    );
  } finally {
    await engine.release();
  }
});

Deno.test("start-up: a strength the LCM-distilled schedule cannot serve is named", async () => {
  await rejects(
    createEngine({
      ...tinyConfig(root, { set: "sd15-lcm", generation: { steps: 4, scheduler: "lcm" } }),
      imageToImage: { strengths: [{ key: "[upscale] strength", value: 0.05 }] },
    }),
    /\[upscale\] strength = 0.05 cannot be used with scheduler "lcm" and 4 steps/,
  );
});

Deno.test("openVaeEncoder: an encoder with external data is rewritten and opened from memory", async () => {
  const inline = join(root, "sd15", "vae_encoder", "model.onnx");
  const model = onnx.onnx.ModelProto.decode(await Deno.readFile(inline));
  const chunks: Uint8Array[] = [];
  let offset = 0;
  for (const t of model.graph!.initializer!) {
    const raw = t.rawData!;
    if (raw.length < 64) continue;
    t.dataLocation = onnx.onnx.TensorProto.DataLocation.EXTERNAL;
    t.externalData = [
      { key: "location", value: "weights.bin" },
      { key: "offset", value: String(offset) },
      { key: "length", value: String(raw.length) },
    ];
    t.rawData = new Uint8Array();
    chunks.push(raw.slice());
    offset += raw.length;
  }
  const dir = await Deno.makeTempDir({ prefix: "vae-encoder-external-" });
  try {
    ok(chunks.length > 0);
    const external = new Uint8Array(offset);
    chunks.reduce((at, c) => (external.set(c, at), at + c.length), 0);
    await Deno.writeFile(join(dir, "weights.bin"), external);
    await Deno.writeFile(join(dir, "model.onnx"), onnx.onnx.ModelProto.encode(model).finish());
    const a = await openVaeEncoder(join(dir, "model.onnx"), { intraOpThreads: 1 });
    const b = await openVaeEncoder(inline, { intraOpThreads: 1 });
    try {
      strictEqual(a.graph, "rewritten");
      const feeds = {
        sample: new Tensor("float32", new Float32Array(3 * 64 * 64).fill(0.25), [1, 3, 64, 64]),
      };
      deepStrictEqual(
        (await a.session.run(feeds)).latent_parameters.data,
        (await b.session.run(feeds)).latent_parameters.data,
      );
    } finally {
      await a.session.release();
      await b.session.release();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("openVaeEncoder: with the optimised-graph cache, a later start opens the rewritten graph without rewriting it", async () => {
  const dir = await Deno.makeTempDir({ prefix: "vae-encoder-rewrite-cache-" });
  try {
    const path = join(dir, "model.onnx");
    await Deno.copyFile(join(root, "sd15", "vae_encoder", "model.onnx"), path);
    const options = { intraOpThreads: 1, optimizedCache: join(dir, "cache") };
    const rewritten: string[] = [];
    const openBytes: BytesOpener = (model, o) => {
      rewritten.push(model.rewrite ?? "(unnamed)");
      return defaultBytesOpener(model, o);
    };
    const feeds = {
      sample: new Tensor("float32", new Float32Array(3 * 64 * 64).fill(0.25), [1, 3, 64, 64]),
    };
    const first = await openVaeEncoder(path, options, undefined, openBytes);
    const expected = (await first.session.run(feeds)).latent_parameters.data;
    await first.session.release();
    strictEqual(first.graph, "rewritten");
    deepStrictEqual(rewritten, [LATENT_PARAMETERS_REWRITE]);

    const second = await openVaeEncoder(path, options, undefined, openBytes);
    try {
      strictEqual(second.graph, "rewritten");
      // Not rewritten again: the graph came from the cache, and it computes the same.
      deepStrictEqual(rewritten, [LATENT_PARAMETERS_REWRITE]);
      deepStrictEqual((await second.session.run(feeds)).latent_parameters.data, expected);
    } finally {
      await second.session.release();
    }

    // Without the cache, every open rewrites.
    const third = await openVaeEncoder(path, { intraOpThreads: 1 }, undefined, openBytes);
    await third.session.release();
    strictEqual(rewritten.length, 2);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
