/**
 * Benchmarks of the diffusion engine, in-process (no Worker):
 *
 * - group "tiny text-to-image": one 512×512 generation per scheduler, 4 steps,
 *   CFG on, on the test-sized model set (`tests/fixtures/builder`, TINY_DIMS). The
 *   models are tiny, so this measures the engine's own cost per generation:
 *   tokenizer, scheduler maths, tensor conversion, guidance, VAE decode of a
 *   512×512 image and PNG-free RGB output.
 * - group "tiny guided and inpaint": depth, openpose (DWPose preprocessing:
 *   letterbox, affine crops, SimCC, drawing), inpaint (VAE encode, latent
 *   blending, paste-back) and image-to-image at strength 1 (VAE encode and
 *   its sampling, add_noise, the same 5 UNet calls), 4 steps, on the same set.
 * - group "tiny upscale": a 1024×1024 upscale (9 tiles at strength 1)
 *   against 9 separate 512×512 image-to-image runs: the cost of tiling
 *   itself (crops, the text encoded once instead of 9 times, the feathered
 *   blend).
 * - group "SD 1.5-width UNet, one call": ONE call of a UNet graph with the
 *   real SD 1.5 I/O shapes and channel widths (`SD15_DIMS`: 320/640/1280,
 *   hidden 768) at 512×512 (latent 64×64), batch 2 (CFG), fp32, ONNX
 *   Runtime's default thread count. The builder's UNet has the real
 *   pyramid and widths but one 3×3 conv per block and no attention or
 *   ResNet pairs (≈117 M parameters, a 470 MB `weights.pb`, against 860 M in
 *   the real UNet), so its time is a LOWER BOUND of the real per-step CPU
 *   cost; one denoising step with CFG is one such call (PNDM makes N + 1).
 *   Measured on 2 shared cores: building takes 1–2.5 s and ≈1 GB RSS, the session
 *   1–3 s; the process peaks at 1.6–1.8 GB RSS, within the 2 GB / 60 s budget, so the
 *   full width is kept. The graph is written once to
 *   `.cache/bench/sd15-full/` (git-ignored) and reused while the builder
 *   version and dims are unchanged.
 *
 * Run: `deno bench -P=test bench/pipeline_bench.ts` (builds what it
 * needs into `./.cache/bench/`). Results are machine-specific; the figures
 * cited in docs/performance.md come from runs on a 2-core x86-64 VM.
 *
 * @module
 */

import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { log } from "../mod/log/mod.ts";
import {
  BUILDER_VERSION,
  buildTinyModelSet,
  buildUnet,
  DEFAULT_SEED,
  SD15_DIMS,
} from "../tests/fixtures/builder/mod.ts";
import {
  checkSession,
  createSession,
  type Feeds,
  floatTensor,
  type ResolvedIo,
  type Session,
  timestepTensor,
} from "../mod/onnx/mod.ts";
import { SCHEDULER_NAMES } from "../mod/schedulers/mod.ts";
import { testPicture, tinyConfig } from "../mod/pipeline/_testing.ts";
import { createEngine } from "../mod/pipeline/engine.ts";
import type { GenerationRequest, Mask, RgbImage } from "../mod/pipeline/types.ts";

const CACHE = fileURLToPath(new URL("../.cache/bench/", import.meta.url));
const SIZE = 512;
const STEPS = 4;

const tinyRoot = join(CACHE, "tiny", "models");
await buildTinyModelSet(tinyRoot);
const engine = await createEngine({
  ...tinyConfig(tinyRoot, {
    generation: { steps: STEPS },
    controlnets: { depth: 1, openpose: 1, inpaint: 0.5 },
  }),
  imageToImage: { strengths: [] },
});

const base = {
  positive: "a lighthouse on a cliff at sunset, detailed",
  negative: "blurry",
  width: SIZE,
  height: SIZE,
  seed: 42,
};

/** Black picture with a bright upright rectangle: the tiny pose models see a person there. */
function figure(): RgbImage {
  const data = new Uint8Array(SIZE * SIZE * 3);
  for (let y = 80; y < 460; y++) {
    data.fill(230, (y * SIZE + 190) * 3, (y * SIZE + 320) * 3);
  }
  return { width: SIZE, height: SIZE, data };
}

/** Regenerate a centred square. */
function centreMask(): Mask {
  const data = new Uint8Array(SIZE * SIZE);
  for (let y = 128; y < 384; y++) data.fill(1, y * SIZE + 128, y * SIZE + 384);
  return { width: SIZE, height: SIZE, data };
}

for (const scheduler of SCHEDULER_NAMES) {
  Deno.bench({
    name: `text-to-image ${scheduler}`,
    group: `tiny text-to-image ${SIZE}×${SIZE}, ${STEPS} steps`,
    baseline: scheduler === "pndm",
    n: 5,
    warmup: 1,
    async fn() {
      await engine.generate({ ...base, mode: "text_to_image" }, {
        settings: { scheduler, steps: STEPS },
      });
    },
  });
}

const guided: Array<[string, GenerationRequest]> = [
  ["text-to-image (reference)", { ...base, mode: "text_to_image" }],
  [
    "guided depth",
    { ...base, mode: "guided_image", controlMode: "depth", image: testPicture(SIZE, SIZE) },
  ],
  ["guided openpose", { ...base, mode: "guided_image", controlMode: "openpose", image: figure() }],
  [
    "guided openpose_full",
    { ...base, mode: "guided_image", controlMode: "openpose_full", image: figure() },
  ],
  [
    "inpaint",
    { ...base, mode: "inpaint_image", image: testPicture(SIZE, SIZE, 1), mask: centreMask() },
  ],
  [
    "image-to-image, strength 1",
    { ...base, mode: "image_to_image", image: testPicture(SIZE, SIZE, 1), strength: 1 },
  ],
];

for (const [name, request] of guided) {
  Deno.bench({
    name,
    group: `tiny guided and inpaint ${SIZE}×${SIZE}, ${STEPS} steps (pndm)`,
    baseline: request.mode === "text_to_image",
    n: 5,
    warmup: 1,
    async fn() {
      await engine.generate(request, { settings: { scheduler: "pndm", steps: STEPS } });
    },
  });
}

const big = testPicture(2 * SIZE, 2 * SIZE);
Deno.bench({
  name: "9 × image-to-image 512×512, strength 1",
  group: "tiny upscale 1024×1024 (pndm, 4 steps)",
  baseline: true,
  n: 3,
  warmup: 1,
  async fn() {
    for (let i = 0; i < 9; i++) {
      const image = testPicture(SIZE, SIZE, i % 2);
      await engine.generate({ ...base, mode: "image_to_image", image, strength: 1, seed: 42 + i }, {
        settings: { scheduler: "pndm", steps: STEPS },
      });
    }
  },
});
Deno.bench({
  name: "upscale_image: 9 tiles, strength 1",
  group: "tiny upscale 1024×1024 (pndm, 4 steps)",
  n: 3,
  warmup: 1,
  async fn() {
    await engine.generate(
      {
        ...base,
        mode: "upscale_image",
        width: 2 * SIZE,
        height: 2 * SIZE,
        image: big,
        strength: 1,
      },
      { settings: { scheduler: "pndm", steps: STEPS } },
    );
  },
});

// ---------------------------------------------------------------------------
// SD 1.5-width UNet: one call.

const FULL_DIR = join(CACHE, "sd15-full", "unet");
const FULL_STAMP = JSON.stringify({
  builder: BUILDER_VERSION,
  seed: DEFAULT_SEED,
  dims: SD15_DIMS,
});

/** Writes the full-width diffusers-flavour UNet once; returns its model.onnx path. */
async function fullWidthUnet(): Promise<string> {
  const model = join(FULL_DIR, "model.onnx");
  const stampPath = join(FULL_DIR, "stamp.json");
  const stamp = await Deno.readTextFile(stampPath).catch(() => "");
  if (stamp === FULL_STAMP) return model;
  const started = performance.now();
  const built = buildUnet(DEFAULT_SEED, SD15_DIMS, { flavour: "diffusers", io: "float32" });
  const buildMs = Math.round(performance.now() - started);
  await Deno.mkdir(FULL_DIR, { recursive: true });
  await Deno.writeFile(model, built.model);
  if (built.external) {
    await Deno.writeFile(join(FULL_DIR, built.external.location), built.external.data);
  }
  await Deno.writeTextFile(stampPath, FULL_STAMP);
  log("info", "bench", "built the SD 1.5-width UNet", {
    buildMs,
    weightsBytes: built.external?.data.length ?? 0,
    rssMB: Math.round(Deno.memoryUsage().rss / 2 ** 20),
  });
  return model;
}

let full: { session: Session; io: ResolvedIo; feeds: Feeds } | undefined;

/** Opens the full-width UNet and builds its feeds (outside the measured span). */
async function openFullWidth(): Promise<NonNullable<typeof full>> {
  if (full) return full;
  const path = await fullWidthUnet();
  const started = performance.now();
  const session = await createSession(path, { label: "unet (SD 1.5 width)" });
  const io = checkSession("unet", session);
  const batch = 2;
  const latent = SIZE / 8;
  const sample = new Float32Array(batch * 4 * latent * latent);
  for (let i = 0; i < sample.length; i++) sample[i] = Math.sin(i * 0.37);
  const hidden = new Float32Array(batch * 77 * 768);
  for (let i = 0; i < hidden.length; i++) hidden[i] = Math.cos(i * 0.11) * 0.5;
  const feeds: Feeds = {
    [io.inputs.sample.name]: floatTensor(io.inputs.sample.dtype, sample, [
      batch,
      4,
      latent,
      latent,
    ]),
    [io.timestep!.name]: timestepTensor(io.timestep!, 981, batch),
    [io.inputs.encoder_hidden_states.name]: floatTensor(
      io.inputs.encoder_hidden_states.dtype,
      hidden,
      [batch, 77, 768],
    ),
  };
  log("info", "bench", "opened the SD 1.5-width UNet", {
    sessionMs: Math.round(performance.now() - started),
    rssMB: Math.round(Deno.memoryUsage().rss / 2 ** 20),
  });
  full = { session, io, feeds };
  return full;
}

Deno.bench({
  name: "UNet call, batch 2, 64×64 latent, fp32",
  group: "SD 1.5-width UNet, one call (per-step CPU cost, lower bound)",
  n: 3,
  warmup: 1,
  async fn(b) {
    const { session, io, feeds } = await openFullWidth();
    b.start();
    const out = await session.run(feeds, [io.outputs.out_sample.name]);
    b.end();
    const dims = out[io.outputs.out_sample.name].dims.join(",");
    if (dims !== `2,4,${SIZE / 8},${SIZE / 8}`) throw new Error(`unexpected out_sample [${dims}]`);
  },
});
