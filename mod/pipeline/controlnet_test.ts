import { deepStrictEqual, ok, rejects, strictEqual } from "node:assert";
import { join } from "node:path";
import { ToolError } from "../mcp/tool.ts";
import { createSessionFromBytes, exposeLatentParameters, Tensor } from "../onnx/mod.ts";
import { TorchGenerator } from "../random/mod.ts";
import { createScheduler } from "../schedulers/mod.ts";
import {
  differingBytes,
  recordingOpener,
  testPicture,
  tinyConfig,
  tinyModels,
} from "./_testing.ts";
import { createEngine } from "./engine.ts";
import type { GenerationRequest, Mask, RgbImage } from "./types.ts";

const root = await tinyModels("controlnet");
const W = 64;
const H = 64;

const base = {
  positive: "a lighthouse on a cliff",
  negative: "",
  width: W,
  height: H,
  seed: 5,
};

function guided(
  image: RgbImage,
  controlMode: "depth" | "openpose" | "openpose_full",
): GenerationRequest {
  return { ...base, mode: "guided_image", controlMode, image };
}

/** Black picture with a bright upright rectangle: the tiny pose models see a person there. */
function figure(x0: number, x1: number): RgbImage {
  const data = new Uint8Array(W * H * 3);
  for (let y = 10; y < 58; y++) {
    for (let x = x0; x < x1; x++) data.fill(230, (y * W + x) * 3, (y * W + x) * 3 + 3);
  }
  return { width: W, height: H, data };
}

Deno.test("ControlNet: conditioning_scale 0 gives the pixels of plain text-to-image", async () => {
  const { open, runs } = recordingOpener();
  const engine = await createEngine(tinyConfig(root, { controlnets: { depth: 0 } }), {
    openSession: open,
  });
  try {
    const plain = await engine.generate({ ...base, mode: "text_to_image" });
    runs.length = 0;
    const zero = await engine.generate(guided(testPicture(W, H), "depth"));
    deepStrictEqual(zero.image.data, plain.image.data);
    // It really went through the ControlNet and the residual UNet.
    const cn = runs.filter((r) => r.label === "controlnet");
    strictEqual(cn.length, 4);
    deepStrictEqual(
      cn[0].feeds.controlnet_cond.dims,
      [2, 3, H, W],
      "control image repeated for CFG",
    );
    strictEqual(cn[0].feeds.conditioning_scale.type, "float64");
    const unet = runs.filter((r) => r.label === "controlnet_unet");
    strictEqual(unet.length, 4);
    strictEqual(Object.keys(unet[0].feeds).filter((k) => k.endsWith("_residual")).length, 13);
    strictEqual(runs.filter((r) => r.label === "unet").length, 0);
    strictEqual(runs.filter((r) => r.label === "depth").length, 1, "depth estimated once");
  } finally {
    await engine.release();
  }
});

Deno.test("ControlNet: the control image changes the output (depth, openpose, openpose_full)", async () => {
  const engine = await createEngine(
    tinyConfig(root, { controlnets: { depth: 1, openpose: 1 } }),
  );
  try {
    const plain = await engine.generate({ ...base, mode: "text_to_image" });
    const a = await engine.generate(guided(testPicture(W, H, 0), "depth"));
    const b = await engine.generate(guided(testPicture(W, H, 1), "depth"));
    ok(differingBytes(a.image, plain.image) > 100, "guidance changes the output");
    ok(differingBytes(a.image, b.image) > 100, "another control image, another output");
    const again = await engine.generate(guided(testPicture(W, H, 0), "depth"));
    deepStrictEqual(again.image.data, a.image.data, "guided generation is deterministic");

    const left = await engine.generate(guided(figure(8, 24), "openpose"));
    const right = await engine.generate(guided(figure(40, 56), "openpose"));
    ok(differingBytes(left.image, right.image) > 100, "pose position matters");
    const full = await engine.generate(guided(figure(8, 24), "openpose_full"));
    strictEqual(full.image.data.length, W * H * 3);
    // No bright pixel, no person: the preprocessor's image error reaches the caller.
    await rejects(
      engine.generate(guided({ width: W, height: H, data: new Uint8Array(W * H * 3) }, "openpose")),
      (e: ToolError) =>
        e instanceof ToolError && e.category === "image" && /no person/.test(e.message),
    );
  } finally {
    await engine.release();
  }
});

Deno.test("inpaint: unmasked pixels are the input's, masked ones are regenerated", async () => {
  const { open, openBytes, runs } = recordingOpener();
  const engine = await createEngine(tinyConfig(root, { controlnets: { inpaint: 0.5 } }), {
    openSession: open,
    openBytes,
  });
  try {
    const image = testPicture(W, H);
    // Regenerate a 24×16 window (not aligned to the 8-pixel latent grid on the right edge).
    const data = new Uint8Array(W * H);
    for (let y = 20; y < 36; y++) for (let x = 12; x < 36; x++) data[y * W + x] = 1;
    const mask: Mask = { width: W, height: H, data };
    const result = await engine.generate({ ...base, mode: "inpaint_image", image, mask });
    let changed = 0;
    for (let p = 0; p < W * H; p++) {
      for (let c = 0; c < 3; c++) {
        const i = p * 3 + c;
        if (data[p] === 0) strictEqual(result.image.data[i], image.data[i], `kept pixel ${p}`);
        else if (result.image.data[i] !== image.data[i]) changed++;
      }
    }
    ok(changed > 0.5 * 24 * 16 * 3, `masked bytes changed: ${changed}`);
    // Control image: the input in [0, 1] with masked pixels at −1.
    const cond = runs.find((r) => r.label === "controlnet")!.feeds.controlnet_cond;
    deepStrictEqual(cond.dims, [2, 3, H, W]);
    strictEqual(cond.data![20 * W + 12], -1);
    strictEqual(cond.data![0], Math.fround(image.data[0] / 255));
    strictEqual(runs.filter((r) => r.label === "vae_encoder").length, 1, "image encoded once");

    // Latent blending (pipeline_controlnet_inpaint.py L1457-1470), checked against the VAE
    // encoder's distribution and the scheduler's add_noise: at kept latent positions the 2nd
    // UNet call sees the image latents noised to timesteps[1] with the initial noise, and the
    // decoder gets the clean image latents. The generator's draws are diffusers': the image
    // latents' sample (prepare_latents → _encode_vae_image), then the noise.
    const rewritten = exposeLatentParameters(
      await Deno.readFile(join(root, "sd15", "vae_encoder", "model.onnx")),
    );
    if (rewritten.kind !== "rewritten") throw new Error(`encoder not rewritten: ${rewritten.kind}`);
    const encoder = await createSessionFromBytes(rewritten.model);
    const pixels = new Float32Array(3 * W * H);
    for (let p = 0; p < W * H; p++) {
      for (let c = 0; c < 3; c++) pixels[c * W * H + p] = 2 * (image.data[p * 3 + c] / 255) - 1;
    }
    const encoded = await encoder.run({ sample: new Tensor("float32", pixels, [1, 3, H, W]) });
    await encoder.release();
    const params = encoded.latent_parameters.data as Float32Array;
    const plane = (W / 8) * (H / 8);
    const generator = new TorchGenerator(base.seed);
    const eps = generator.randn(4 * plane);
    const raw = Float32Array.from(
      { length: 4 * plane },
      (_, i) => params[i] + Math.exp(0.5 * params[4 * plane + i]) * eps[i],
    );
    const imageLatents = raw.map((v) => v * 0.18215);
    const scheduler = createScheduler(
      "pndm",
      JSON.parse(
        await Deno.readTextFile(join(root, "sd15", "scheduler", "scheduler_config.json")),
      ),
    );
    scheduler.setTimesteps(3);
    const noise = generator.randn(4 * plane);
    const noised = scheduler.addNoise(imageLatents, noise, scheduler.timesteps[1]);
    const unetRuns = runs.filter((r) => r.label === "controlnet_unet");
    const second = unetRuns[1].feeds.sample.data!;
    const decoderInput = runs.find((r) => r.label === "vae_decoder")!.feeds.latent_sample.data!;
    let kept = 0;
    for (let ly = 0; ly < H / 8; ly++) {
      for (let lx = 0; lx < W / 8; lx++) {
        const masked = data[ly * 8 * W + lx * 8] === 1; // nearest: pixel (8x, 8y)
        if (masked) continue;
        kept++;
        for (let c = 0; c < 4; c++) {
          const i = c * plane + ly * (W / 8) + lx;
          ok(Math.abs(second[i] - noised[i]) < 1e-5, `noised known latent ${i}`);
          ok(
            Math.abs(decoderInput[i] - raw[i]) < 1e-5 * (1 + Math.abs(raw[i])),
            `clean latent ${i}: ${decoderInput[i]} vs ${raw[i]}`,
          );
        }
      }
    }
    ok(kept > 0 && kept < plane);

    const again = await engine.generate({ ...base, mode: "inpaint_image", image, mask });
    deepStrictEqual(again.image.data, result.image.data, "inpainting is deterministic");
  } finally {
    await engine.release();
  }
});
