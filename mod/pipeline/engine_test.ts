import { deepStrictEqual, ok, rejects, strictEqual } from "node:assert";
import { join } from "node:path";
import { ToolError } from "../mcp/tool.ts";
import { TorchGenerator } from "../random/mod.ts";
import { ClipTokenizer } from "../tokenizer/mod.ts";
import {
  differingBytes,
  type RecordedRun,
  recordingOpener,
  testPicture,
  tinyConfig,
  tinyModels,
} from "./_testing.ts";
import { createEngine } from "./engine.ts";
import { CancelledError } from "./errors.ts";
import type { GenerationRequest } from "./types.ts";

const root = await tinyModels("engine");
const W = 64;
const H = 128;

function t2i(over: Partial<GenerationRequest> = {}): GenerationRequest {
  return {
    mode: "text_to_image",
    positive: "a red apple on a wooden table",
    negative: "blurry",
    width: W,
    height: H,
    seed: 42,
    ...over,
  } as GenerationRequest;
}

const unetRuns = (runs: RecordedRun[], label = "unet") => runs.filter((r) => r.label === label);

Deno.test("text-to-image: size, determinism per seed, prompt and seed change the pixels", async () => {
  const engine = await createEngine(tinyConfig(root));
  try {
    const a = await engine.generate(t2i());
    strictEqual(a.image.width, W);
    strictEqual(a.image.height, H);
    strictEqual(a.image.data.length, W * H * 3);
    ok(new Set(a.image.data).size > 16, "the image is not flat");
    deepStrictEqual(a.notes, []);
    const b = await engine.generate(t2i());
    deepStrictEqual(b.image.data, a.image.data, "same seed, same pixels");
    const seed = await engine.generate(t2i({ seed: 43 }));
    ok(differingBytes(seed.image, a.image) > 100, "another seed changes the pixels");
    const prompt = await engine.generate(t2i({ positive: "a blue car in the snow" }));
    ok(differingBytes(prompt.image, a.image) > 100, "another prompt changes the pixels");
  } finally {
    await engine.release();
  }
});

Deno.test("CFG: negative then positive in one batch-2 run; guidance <= 1 runs batch 1", async () => {
  const { open, runs } = recordingOpener();
  const engine = await createEngine(tinyConfig(root), { openSession: open });
  const tokenizer = await ClipTokenizer.load(join(root, "sd15", "tokenizer"));
  try {
    const guided = await engine.generate(t2i());
    const text = runs.filter((r) => r.label === "text_encoder");
    strictEqual(text.length, 1, "one text-encoder run");
    const ids = text[0].feeds.input_ids;
    strictEqual(ids.type, "int32", "diffusers export: int32 ids");
    deepStrictEqual(ids.dims, [2, 77]);
    deepStrictEqual(
      ids.ints!.slice(0, 77),
      Array.from(tokenizer.encode("blurry").ids),
      "uncond first",
    );
    deepStrictEqual(
      ids.ints!.slice(77),
      Array.from(tokenizer.encode("a red apple on a wooden table").ids),
    );
    const unet = unetRuns(runs);
    strictEqual(unet.length, 4, "PNDM with 3 steps calls the UNet N+1 = 4 times");
    for (const r of unet) deepStrictEqual(r.feeds.sample.dims, [2, 4, H / 8, W / 8]);

    runs.length = 0;
    const plain = await engine.generate(t2i(), { settings: { guidanceScale: 1 } });
    deepStrictEqual(runs.find((r) => r.label === "text_encoder")!.feeds.input_ids.dims, [1, 77]);
    const unet1 = unetRuns(runs);
    strictEqual(unet1.length, 4);
    for (const r of unet1) deepStrictEqual(r.feeds.sample.dims, [1, 4, H / 8, W / 8]);
    ok(differingBytes(plain.image, guided.image) > 100, "CFG on and off differ");
  } finally {
    await engine.release();
  }
});

Deno.test("initial latents are torch.randn(seed) × init_noise_sigma (pndm and euler)", async () => {
  const { open, runs } = recordingOpener();
  const engine = await createEngine(tinyConfig(root), { openSession: open });
  try {
    const n = 4 * (H / 8) * (W / 8);
    const expected = new TorchGenerator(7).randn(n);
    await engine.generate(t2i({ seed: 7 }));
    const first = unetRuns(runs)[0].feeds.sample.data!;
    // PNDM: init_noise_sigma = 1, scale_model_input = identity; both CFG halves alike.
    deepStrictEqual(first.subarray(0, n), expected);
    deepStrictEqual(first.subarray(n), expected);

    runs.length = 0;
    await engine.generate(t2i({ seed: 7 }), { settings: { scheduler: "euler" } });
    const euler = unetRuns(runs)[0].feeds.sample.data!;
    // Euler (linspace): the first timestep is 999 and init_noise_sigma = sigma(999); the
    // UNet sees latents / sqrt(sigma² + 1). sigma from SD 1.5's scaled_linear betas, in doubles.
    let alphaCumprod = 1;
    const b0 = Math.sqrt(0.00085);
    const b1 = Math.sqrt(0.012);
    for (let i = 0; i < 1000; i++) alphaCumprod *= 1 - (b0 + ((b1 - b0) * i) / 999) ** 2;
    const sigma = Math.sqrt((1 - alphaCumprod) / alphaCumprod);
    ok(Math.abs(sigma - 14.6146) < 1e-3, `sigma_max ${sigma}`);
    const factor = sigma / Math.sqrt(sigma * sigma + 1);
    for (let i = 0; i < n; i += 37) {
      ok(
        Math.abs(euler[i] - expected[i] * factor) < 1e-4 * (1 + Math.abs(expected[i])),
        `latent ${i}`,
      );
    }
  } finally {
    await engine.release();
  }
});

Deno.test("every scheduler runs end to end; stochastic ones repeat with the seed", async () => {
  const { open, runs } = recordingOpener();
  const engine = await createEngine(tinyConfig(root), { openSession: open });
  try {
    const cases = [
      { scheduler: "pndm", calls: 4 },
      { scheduler: "ddim", calls: 3 },
      { scheduler: "euler", calls: 3 },
      { scheduler: "euler_a", calls: 3 },
      { scheduler: "dpmpp_2m", calls: 3 },
      { scheduler: "dpmpp_2m", calls: 3, karras: true },
      { scheduler: "lcm", calls: 3 },
      { scheduler: "ddim", calls: 3, eta: 1 },
    ] as const;
    const images = [];
    for (const c of cases) {
      runs.length = 0;
      const settings = {
        scheduler: c.scheduler,
        karras: "karras" in c,
        eta: "eta" in c ? c.eta : 0,
      };
      const result = await engine.generate(t2i(), { settings });
      strictEqual(unetRuns(runs).length, c.calls, `${c.scheduler}: UNet calls`);
      strictEqual(result.image.data.length, W * H * 3);
      ok(new Set(result.image.data).size > 16, `${c.scheduler}: not flat`);
      images.push(result.image);
    }
    ok(differingBytes(images[0], images[2]) > 0, "pndm and euler differ");
    for (const scheduler of ["euler_a", "lcm"] as const) {
      const a = await engine.generate(t2i(), { settings: { scheduler } });
      const b = await engine.generate(t2i(), { settings: { scheduler } });
      deepStrictEqual(a.image.data, b.image.data, `${scheduler} repeats with the seed`);
    }
  } finally {
    await engine.release();
  }
});

Deno.test("export flavours: diffusers, optimum int64/scalar timestep, fp16 I/O, LCM UNet", async () => {
  const cases = [
    { set: "sd15", ids: "int32", timestep: { type: "float32", dims: [2] } },
    // The pinned fp32 set's contract (diffusers 0.6.0 script): int64 timestep [batch].
    { set: "sd15-fp32", ids: "int32", timestep: { type: "int64", dims: [2] } },
    { set: "sd15-optimum", ids: "int64", timestep: { type: "int64", dims: [2] } },
    { set: "sd15-optimum-scalar", ids: "int64", timestep: { type: "float32", dims: [] } },
    { set: "sd15-fp16", ids: "int32", timestep: { type: "float16", dims: [2] } },
  ];
  for (const c of cases) {
    const { open, runs } = recordingOpener();
    const engine = await createEngine(tinyConfig(root, { set: c.set }), { openSession: open });
    try {
      const result = await engine.generate(t2i());
      strictEqual(result.image.data.length, W * H * 3, c.set);
      ok(new Set(result.image.data).size > 16, `${c.set}: not flat`);
      strictEqual(runs.find((r) => r.label === "text_encoder")!.feeds.input_ids.type, c.ids, c.set);
      const ts = unetRuns(runs)[0].feeds.timestep;
      deepStrictEqual({ type: ts.type, dims: ts.dims }, c.timestep, c.set);
      if (c.set === "sd15-fp16") strictEqual(unetRuns(runs)[0].feeds.sample.type, "float16");
    } finally {
      await engine.release();
    }
  }
});

Deno.test("LCM UNet: guidance embedding as timestep_cond, no CFG batch, negative prompt noted", async () => {
  const { open, runs } = recordingOpener();
  const engine = await createEngine(
    tinyConfig(root, { set: "sd15-lcm", generation: { scheduler: "lcm", guidanceScale: 8.5 } }),
    { openSession: open },
  );
  try {
    strictEqual(engine.info.lcmUnet, true);
    const result = await engine.generate(t2i());
    strictEqual(result.image.data.length, W * H * 3);
    ok(result.notes.some((n) => /negative prompt is not used/.test(n)), result.notes.join("; "));
    deepStrictEqual(runs.find((r) => r.label === "text_encoder")!.feeds.input_ids.dims, [1, 77]);
    const unet = unetRuns(runs);
    strictEqual(unet.length, 3);
    const cond = unet[0].feeds.timestep_cond;
    deepStrictEqual(cond.dims, [1, 256]);
    deepStrictEqual(unet[0].feeds.sample.dims, [1, 4, H / 8, W / 8]);
    // w = (8.5 − 1)·1000 = 7500; frequency 0 is 1 → sin(7500), cos(7500) at index 128.
    ok(Math.abs(cond.data![0] - Math.sin(7500)) < 1e-3);
    ok(Math.abs(cond.data![128] - Math.cos(7500)) < 1e-3);
  } finally {
    await engine.release();
  }
});

Deno.test("start-up: a model that breaks the contract, or a missing file, is named", async () => {
  const broken = await Deno.makeTempDir({ prefix: "pipeline-broken-" });
  try {
    for (const part of ["text_encoder", "unet", "vae_decoder", "tokenizer", "scheduler"]) {
      await Deno.mkdir(join(broken, part), { recursive: true });
      for await (const f of Deno.readDir(join(root, "sd15", part))) {
        await Deno.copyFile(join(root, "sd15", part, f.name), join(broken, part, f.name));
      }
    }
    // A VAE decoder where the UNet should be.
    await Deno.copyFile(
      join(root, "sd15", "vae_decoder", "model.onnx"),
      join(broken, "unet", "model.onnx"),
    );
    const config = tinyConfig(root);
    config.models.base = broken;
    const unetPath = join(broken, "unet", "model.onnx");
    await rejects(createEngine(config), (e: Error) => {
      ok(e.message.startsWith(`${unetPath}: unet `), e.message);
      ok(/missing|expected/.test(e.message), e.message);
      return true;
    });
    await Deno.remove(join(broken, "text_encoder", "model.onnx"));
    await rejects(createEngine(config), (e: Error) => {
      ok(e.message.includes(join(broken, "text_encoder", "model.onnx")), e.message);
      ok(e.message.includes("file not found"), e.message);
      return true;
    });
    // A scheduler setting the scheduler cannot honour fails at start-up, naming the keys.
    await rejects(
      createEngine(tinyConfig(root, { generation: { scheduler: "pndm", karras: true } })),
      (e: Error) => {
        ok(e.message.includes('scheduler "pndm" (generation.scheduler, karras = true'), e.message);
        ok(e.message.includes(join(root, "sd15", "scheduler", "scheduler_config.json")), e.message);
        return true;
      },
    );
  } finally {
    await Deno.remove(broken, { recursive: true });
  }
});

Deno.test("progress after every step; cancellation stops at the next step boundary", async () => {
  const { open, runs } = recordingOpener();
  const engine = await createEngine(tinyConfig(root), { openSession: open });
  try {
    const seen: Array<[number, number]> = [];
    await engine.generate(t2i(), { onProgress: (s, t) => seen.push([s, t]) });
    deepStrictEqual(seen, [[1, 4], [2, 4], [3, 4], [4, 4]]);

    runs.length = 0;
    let cancel = false;
    await rejects(
      engine.generate(t2i(), { isCancelled: () => cancel, onProgress: () => cancel = true }),
      CancelledError,
    );
    strictEqual(unetRuns(runs).length, 1, "stopped after the first step");
    strictEqual(runs.some((r) => r.label === "vae_decoder"), false, "nothing decoded");
    const after = await engine.generate(t2i());
    strictEqual(after.image.width, W, "the engine serves the next request");
  } finally {
    await engine.release();
  }
});

Deno.test("a prompt over 77 CLIP tokens is noted", async () => {
  const engine = await createEngine(tinyConfig(root));
  const tokenizer = await ClipTokenizer.load(join(root, "sd15", "tokenizer"));
  try {
    const long = Array.from({ length: 90 }, (_, i) => `word${i % 7}`).join(" ");
    const given = tokenizer.encode(long).tokenCount + 2;
    ok(given > 77);
    const result = await engine.generate(t2i({ positive: long, negative: long }));
    deepStrictEqual(result.notes, [
      `positive prompt was truncated to 77 CLIP tokens (${given} given); the end was ignored`,
      `negative prompt was truncated to 77 CLIP tokens (${given} given); the end was ignored`,
    ]);
  } finally {
    await engine.release();
  }
});

Deno.test("ControlNet disabled in config → configuration ToolError naming the key", async () => {
  const engine = await createEngine(tinyConfig(root));
  try {
    const image = testPicture(W, H);
    await rejects(
      engine.generate({ ...t2i(), mode: "guided_image", controlMode: "openpose_full", image }),
      (e: ToolError) =>
        e instanceof ToolError && e.category === "configuration" &&
        e.message.includes("controlnet.openpose.enabled"),
    );
    await rejects(
      engine.generate({
        ...t2i(),
        mode: "inpaint_image",
        image,
        mask: { width: W, height: H, data: new Uint8Array(W * H) },
      }),
      (e: ToolError) =>
        e.category === "configuration" && e.message.includes("controlnet.inpaint.enabled"),
    );
  } finally {
    await engine.release();
  }
});
