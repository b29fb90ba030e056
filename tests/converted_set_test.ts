/**
 * A set converted from SD 1.x weights (`mod/convert` `convertSd15`) runs in
 * the engine like an exported one: text-to-image (the same pixels as the
 * builder's own stand-in on the same weights), image-to-image, inpainting
 * through the ControlNet-residual UNet made from the same weights, and the
 * tiled upscale; fp32 and fp16 sets; kohya LoRAs find every module.
 */

import { deepStrictEqual, notDeepStrictEqual, ok, strictEqual } from "node:assert";
import { join } from "node:path";
import { convertSd15 } from "../mod/convert/mod.ts";
import { randomTestModels, randomTestWeights, TEST_UNET } from "../mod/convert/sd15_testing.ts";
import { buildSd15ControlNet, OPSET, Rng } from "../mod/graph/mod.ts";
import { kohyaModules, parseSafetensors, patchModel } from "../mod/lora/mod.ts";
import { buildTinyLora, type TinyLoraModule } from "./fixtures/builder/mod.ts";
import { differingBytes, testPicture, tinyConfig } from "../mod/pipeline/_testing.ts";
import { createEngine } from "../mod/pipeline/engine.ts";
import type { EngineConfig } from "../mod/pipeline/engine_config.ts";
import type { GenerationRequest, Mask } from "../mod/pipeline/types.ts";

const SEED = 31;
const W = 64;
const H = 64;
const tmp = await Deno.makeTempDir({ prefix: "converted_set_" });
const base = { positive: "a lighthouse on a cliff", negative: "fog", width: W, height: H, seed: 7 };

/**
 * An engine config for a set: text-to-image only, or (`controlnet`) also
 * image-to-image and inpainting with that ControlNet.
 */
function config(set: string, controlnet?: string, guidance = 7.5): EngineConfig {
  const c = tinyConfig(tmp, { generation: { steps: 3, guidanceScale: guidance } });
  const models = { base: set, controlnetUnet: join(set, "controlnet_unet", "model.onnx") };
  if (!controlnet) return { ...c, models };
  return {
    ...c,
    models,
    controlnet: {
      ...c.controlnet,
      inpaint: { enabled: true, model: controlnet, conditioningScale: 0.5 },
    },
    imageToImage: { strengths: [] },
  };
}

const fp32 = join(tmp, "fp32");
const fp16 = join(tmp, "fp16");
const controlnet = join(tmp, "controlnet", "inpaint.onnx");
await convertSd15(randomTestWeights(SEED), {
  outDir: fp32,
  components: ["text_encoder", "unet", "controlnet_unet", "vae_decoder", "vae_encoder"],
});
await convertSd15(randomTestWeights(SEED), { outDir: fp16, precision: "fp16" });
await Deno.mkdir(join(tmp, "controlnet"));
await buildSd15ControlNet(new Rng(SEED, "inpaint"), TEST_UNET).graph.writeModel(controlnet, {
  opset: OPSET,
});

addEventListener("unload", () => Deno.removeSync(tmp, { recursive: true }));

Deno.test("converted set: text-to-image gives the pixels of the builder's stand-in on the same weights", async () => {
  // The stand-in set: the builder's random models written in the same layout.
  const ref = join(tmp, "reference");
  const models = randomTestModels(SEED);
  for (
    const [dir, m] of [["text_encoder", models.textEncoder], ["unet", models.unet], [
      "vae_decoder",
      models.vaeDecoder,
    ]] as const
  ) {
    await Deno.mkdir(join(ref, dir), { recursive: true });
    await m.graph.writeModel(join(ref, dir, "model.onnx"), {
      opset: OPSET,
      externalData: dir === "unet" ? { location: "weights.pb", minBytes: 1024 } : undefined,
    });
  }
  for (const dir of ["tokenizer", "scheduler"]) {
    await Deno.mkdir(join(ref, dir));
    for (const e of Deno.readDirSync(join(fp32, dir))) {
      await Deno.copyFile(join(fp32, dir, e.name), join(ref, dir, e.name));
    }
  }
  const request: GenerationRequest = { ...base, mode: "text_to_image" };
  const engine = await createEngine(config(fp32));
  const reference = await createEngine(config(ref));
  try {
    const a = await engine.generate(request);
    strictEqual(a.image.data.length, W * H * 3);
    ok(new Set(a.image.data).size > 16, "the image is not flat");
    deepStrictEqual((await reference.generate(request)).image.data, a.image.data);
    const other = await engine.generate({ ...request, seed: 8 });
    ok(differingBytes(other.image, a.image) > 100, "another seed, another image");
  } finally {
    await engine.release();
    await reference.release();
  }
});

Deno.test("converted set: image-to-image and inpainting through its residual UNet", async () => {
  const engine = await createEngine(config(fp32, controlnet));
  try {
    strictEqual(engine.info.vaeEncoder, "rewritten", "the converted encoder's sampler is found");
    const image = testPicture(W, H);
    const i2i = await engine.generate({ ...base, mode: "image_to_image", image, strength: 0.5 });
    strictEqual(i2i.image.data.length, W * H * 3);
    ok(differingBytes(i2i.image, image) > 100, "the picture is changed");
    const again = await engine.generate({ ...base, mode: "image_to_image", image, strength: 0.5 });
    deepStrictEqual(again.image.data, i2i.image.data, "deterministic per seed");

    const data = new Uint8Array(W * H);
    for (let y = 16; y < 40; y++) for (let x = 8; x < 40; x++) data[y * W + x] = 1;
    const mask: Mask = { width: W, height: H, data };
    const inpainted = await engine.generate({ ...base, mode: "inpaint_image", image, mask });
    let changed = 0;
    for (let p = 0; p < W * H; p++) {
      for (let c = 0; c < 3; c++) {
        const i = p * 3 + c;
        if (data[p] === 0) strictEqual(inpainted.image.data[i], image.data[i], `kept pixel ${p}`);
        else if (inpainted.image.data[i] !== image.data[i]) changed++;
      }
    }
    ok(changed > 0.5 * 24 * 32 * 3, `masked bytes changed: ${changed}`);
  } finally {
    await engine.release();
  }
});

Deno.test("converted set: the tiled upscale refines a 512×512 image", async () => {
  const engine = await createEngine(config(fp32, controlnet, 1));
  try {
    const image = testPicture(512, 512);
    const up = await engine.generate({
      ...base,
      mode: "upscale_image",
      width: 512,
      height: 512,
      image,
      strength: 0.3,
    });
    strictEqual(up.image.width, 512);
    ok(differingBytes(up.image, image) > 1000, "refined");
  } finally {
    await engine.release();
  }
});

Deno.test("converted fp16 set: text-to-image runs and stays near the fp32 set's image", async () => {
  const request: GenerationRequest = { ...base, mode: "text_to_image" };
  const a = await createEngine(config(fp32));
  const b = await createEngine(config(fp16));
  try {
    const x = (await a.generate(request)).image.data;
    const y = (await b.generate(request)).image.data;
    notDeepStrictEqual(y, x, "half precision rounds somewhere");
    let sum = 0;
    for (let i = 0; i < x.length; i++) sum += Math.abs(x[i] - y[i]);
    ok(sum / x.length < 4, `mean difference ${sum / x.length} grey levels`);
  } finally {
    await a.release();
    await b.release();
  }
});

Deno.test("converted set: a kohya LoRA over every Linear and Conv of the UNet and text encoder matches them all", async () => {
  const models = randomTestModels(SEED);
  const kohya = (prefix: string, m: { scope: string }) =>
    prefix + m.scope.replaceAll("/", "_").replaceAll(".", "_");
  const modules: TinyLoraModule[] = [
    ...models.unet.modules.map((m) => ({ ...m, key: kohya("lora_unet_", m) })),
    ...models.textEncoder.modules.map((m) => ({ ...m, key: kohya("lora_te_", m) })),
  ];
  const path = join(tmp, "all.safetensors");
  await Deno.writeFile(path, buildTinyLora(SEED, { modules, rank: 2 }));
  const lora = kohyaModules(parseSafetensors(await Deno.readFile(path), path), path);
  strictEqual(lora.modules.length, modules.length);
  const loras = [{ path, weight: 1, modules: lora.modules }];
  for (
    const [target, file, prefix] of [
      ["unet", "unet", "lora_unet_"],
      ["unet", "controlnet_unet", "lora_unet_"],
      ["text_encoder", "text_encoder", "lora_te_"],
    ] as const
  ) {
    const patched = await patchModel(join(fp32, file, "model.onnx"), target, loras, {
      scratch: "memory",
    });
    ok(patched, file);
    const want = modules.filter((m) => m.key.startsWith(prefix)).map((m) => m.key).sort();
    deepStrictEqual([...patched.matched[0]].sort(), want, `${file}: every module matched`);
    await patched.dispose();
  }
});
