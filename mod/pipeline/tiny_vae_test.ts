/**
 * The tiny VAE decoder (`[models] vae_decoder = "tiny"`, TAESD contract:
 * latents fed unscaled, [-1, 1] out) and the fast preset's sampling (LCM
 * LoRA, lcm scheduler, 4 steps, no CFG batch) on the tiny set, with real
 * ONNX Runtime sessions.
 */
import { deepStrictEqual, notDeepStrictEqual, ok, strictEqual } from "node:assert";
import { join } from "node:path";
import { buildTinyLora, TINY_VAE_DECODER_PATH } from "../../tests/fixtures/builder/mod.ts";
import { checkSession, createSession, floatTensor } from "../onnx/mod.ts";
import { differingBytes, recordingOpener, tinyConfig, tinyModels } from "./_testing.ts";
import { createEngine } from "./engine.ts";
import { decodedToRgb } from "./image_tensors.ts";
import { decodeLatents, VAE_SCALING_FACTOR } from "./vae.ts";
import { toFloat32 } from "../onnx/mod.ts";

const root = await tinyModels("tiny_vae");
const tinyPath = join(root, TINY_VAE_DECODER_PATH);
const request = {
  mode: "text_to_image" as const,
  positive: "a lighthouse",
  negative: "blurry",
  width: 64,
  height: 48,
  seed: 5,
};

Deno.test("decodeLatents: scale 1 feeds TAESD the latents as they are; the default divides by 0.18215", async () => {
  const session = await createSession(tinyPath, { intraOpThreads: 1 });
  try {
    const io = checkSession("vae_decoder", session);
    const latents = Float32Array.from({ length: 4 * 6 * 8 }, (_, i) => Math.cos(i * 0.21));
    const dims = [1, 4, 6, 8];
    const direct = async (z: Float32Array) =>
      decodedToRgb(
        toFloat32((await session.run({ latent_sample: floatTensor("float32", z, dims) })).sample),
        64,
        48,
      );
    deepStrictEqual(await decodeLatents(session, io, latents, dims, 1), await direct(latents));
    const f = Math.fround(VAE_SCALING_FACTOR);
    deepStrictEqual(
      await decodeLatents(session, io, latents, dims),
      await direct(latents.map((x) => x / f)),
    );
  } finally {
    await session.release();
  }
});

Deno.test('engine: vae_decoder = "tiny" decodes with the tiny decoder; the denoising is the same', async () => {
  const full = recordingOpener();
  const tiny = recordingOpener();
  const base = tinyConfig(root);
  const a = await createEngine(base, { openSession: full.open });
  const b = await createEngine(
    { ...base, models: { ...base.models, vaeDecoder: "tiny", tinyVaeDecoder: tinyPath } },
    { openSession: tiny.open },
  );
  try {
    ok(Object.keys(b.info.models).includes(tinyPath), "the tiny decoder is loaded");
    ok(!Object.keys(a.info.models).includes(tinyPath));
    const x = await a.generate(request);
    const y = await b.generate(request);
    ok(differingBytes(x.image, y.image) > 0, "another decoder, another picture");
    const unetFeeds = (runs: typeof full.runs) =>
      runs.filter((r) => r.label === "unet").map((r) => r.feeds.sample.data);
    deepStrictEqual(unetFeeds(tiny.runs), unetFeeds(full.runs), "same UNet inputs");
    // The tiny decoder got the final latents unscaled, the full one divided by 0.18215.
    const last = (runs: typeof full.runs) => runs.filter((r) => r.label === "vae_decoder").at(-1)!;
    const zt = last(tiny.runs).feeds.latent_sample.data!;
    const zf = last(full.runs).feeds.latent_sample.data!;
    const f = Math.fround(VAE_SCALING_FACTOR);
    ok(zt.every((v, i) => Math.abs(v / f - zf[i]) <= 1e-4 * Math.max(1, Math.abs(zf[i]))));
  } finally {
    await a.release();
    await b.release();
  }
});

Deno.test("fast preset sampling: LCM LoRA (kohya layout) + lcm, 4 steps, guidance 1 = 4 UNet runs of batch 1", async () => {
  const dir = await Deno.makeTempDir({ prefix: "fast_preset_" });
  try {
    const lora = join(dir, "lcm.safetensors");
    await Deno.writeFile(lora, buildTinyLora(31, { rank: 4, alpha: 4 }));
    const settings = { scheduler: "lcm", steps: 4, guidanceScale: 1 } as const;
    const plain = recordingOpener();
    const base = tinyConfig(root, { generation: settings });
    const fast = await createEngine(
      {
        ...base,
        models: { ...base.models, vaeDecoder: "tiny", tinyVaeDecoder: tinyPath },
        lora: { files: [{ path: lora, weight: 1 }] },
      },
    );
    const noLora = await createEngine(base, { openSession: plain.open });
    try {
      // The LoRA'd UNet is opened by mod/lora, so the sampling is observed on the plain engine.
      const steps: number[] = [];
      const result = await fast.generate(request, { onProgress: (i) => steps.push(i) });
      deepStrictEqual(steps, [1, 2, 3, 4]);
      deepStrictEqual(result.notes, [
        "the negative prompt is not used: guidance_scale 1 <= 1 runs without classifier-free " +
        "guidance (the fast and turbo presets do)",
      ]);
      const other = await noLora.generate(request);
      notDeepStrictEqual(result.image.data, other.image.data, "the LoRA is blended in");
      const unet = plain.runs.filter((r) => r.label === "unet");
      strictEqual(unet.length, 4);
      ok(unet.every((r) => r.feeds.sample.dims[0] === 1), "no CFG batch");
      deepStrictEqual(unet.map((r) => Array.from(r.feeds.timestep.data!)), [
        [999],
        [759],
        [499],
        [259],
      ]); // LCMScheduler, 4 steps (diffusers `scheduling_lcm.py`)
      const text = plain.runs.filter((r) => r.label === "text_encoder");
      deepStrictEqual(text.map((r) => r.feeds.input_ids.dims), [[1, 77]], "positive prompt only");
    } finally {
      await fast.release();
      await noLora.release();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
