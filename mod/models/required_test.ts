import { deepStrictEqual, doesNotThrow, ok, throws } from "node:assert";
import type { LockEntry } from "./lock.ts";
import {
  componentsFor,
  configModelPaths,
  neededFiles,
  requireLocked,
  toLockPath,
} from "./required.ts";

const e = (path: string): LockEntry => ({
  component: "unet",
  path,
  url: "fixture://x",
  size: 1,
  sha256: "0".repeat(64),
});

Deno.test("requireLocked: every needed path must be in the lock", () => {
  const entries = [e("sd15/unet/model.onnx"), e("controlnet/depth.onnx")];
  doesNotThrow(() =>
    requireLocked(["/m/sd15/unet/model.onnx", "controlnet/depth.onnx"], entries, "/m")
  );
  throws(
    () => requireLocked(["/m/sd15/unet/model.onnx", "/m/annotators/depth.onnx"], entries, "/m"),
    { message: "annotators/depth.onnx is not in models.lock" },
  );
  throws(
    () => requireLocked(["/elsewhere/x.onnx", "./a.onnx"], entries, "/m"),
    {
      message: "/elsewhere/x.onnx is outside the models root /m, so it is not in models.lock\n" +
        "a.onnx is not in models.lock",
    },
  );
  deepStrictEqual(toLockPath("/m/a/b.onnx", "/m"), "a/b.onnx");
});

Deno.test("componentsFor / configModelPaths follow the enabled features", () => {
  deepStrictEqual(componentsFor({ depth: false, openpose: false, inpaint: false }), [
    "text_encoder",
    "unet",
    "vae_decoder",
    "vae_encoder",
    "tokenizer",
    "scheduler",
  ]);
  deepStrictEqual(componentsFor({ depth: true, openpose: false, inpaint: true }).slice(6), [
    "controlnet_unet",
    "controlnet_depth",
    "depth",
    "controlnet_inpaint",
  ]);
  const config = {
    models: { root: "/m", base: "/m/sd15", controlnetUnet: "/m/sd15/controlnet_unet/model.onnx" },
    controlnet: {
      depth: { enabled: false, model: "/m/cn/d.onnx", preprocessor: "/m/a/d.onnx" },
      openpose: {
        enabled: true,
        model: "/m/cn/p.onnx",
        detector: "/m/a/y.onnx",
        estimator: "/m/a/e.onnx",
      },
      inpaint: { enabled: false, model: "/m/cn/i.onnx" },
    },
  };
  deepStrictEqual(configModelPaths(config).slice(7), [
    "/m/sd15/controlnet_unet/model.onnx",
    "/m/cn/p.onnx",
    "/m/a/y.onnx",
    "/m/a/e.onnx",
  ]);
  deepStrictEqual(configModelPaths(config)[0], "/m/sd15/text_encoder/model.onnx");
});

Deno.test("neededFiles: exactly what the config's keys name; other entries are ignored", () => {
  const at = (component: LockEntry["component"], path: string): LockEntry => ({
    ...e(path),
    component,
  });
  const entries = [
    at("unet", "sd15/unet/model.onnx"),
    at("unet", "sd15/unet/weights.pb"),
    at("unet", "mine/unet/model.onnx"),
    at("unet", "mine/unet/model.onnx_data"),
    at("tokenizer", "mine/tokenizer/tokenizer.json"),
    at("tokenizer", "mine/tokenizer/tokenizer_config.json"),
    at("controlnet_unet", "mine/controlnet_unet/model.onnx"),
    at("controlnet_depth", "cn/depth.onnx"),
    at("controlnet_depth", "cn/depth.onnx_data"),
    at("controlnet_depth", "cn/depth-v2.onnx"),
    at("controlnet_inpaint", "cn/inpaint.onnx"),
    at("lora", "lora/a.safetensors"),
    at("lora", "lora/b.safetensors"),
  ];
  const config = {
    models: { root: "/m", base: "/m/mine", controlnetUnet: "/m/mine/controlnet_unet/model.onnx" },
    controlnet: {
      depth: { enabled: true, model: "/m/cn/depth.onnx", preprocessor: "/m/a/d.onnx" },
      openpose: { enabled: false, model: "/m/x", detector: "/m/y", estimator: "/m/z" },
      inpaint: { enabled: false, model: "/m/cn/inpaint.onnx" },
    },
    lora: { files: [{ path: "/m/lora/b.safetensors" }] },
  };
  const needed = neededFiles(config, entries);
  deepStrictEqual(
    needed.files.map((f) => [f.path, f.key, f.entry !== undefined]),
    [
      ["mine/text_encoder/model.onnx", '[models] base = "mine"', false],
      ["mine/unet/model.onnx", '[models] base = "mine"', true],
      ["mine/vae_decoder/model.onnx", '[models] base = "mine"', false],
      ["mine/vae_encoder/model.onnx", '[models] base = "mine"', false],
      // tokenizer.json is locked, so vocab.json + merges.txt are not demanded
      ["mine/scheduler/scheduler_config.json", '[models] base = "mine"', false],
      ["mine/unet/model.onnx_data", '[models] base = "mine"', true],
      ["mine/tokenizer/tokenizer.json", '[models] base = "mine"', true],
      ["mine/tokenizer/tokenizer_config.json", '[models] base = "mine"', true],
      [
        "mine/controlnet_unet/model.onnx",
        '[models] controlnet_unet = "mine/controlnet_unet/model.onnx"',
        true,
      ],
      ["cn/depth.onnx", '[controlnet.depth] model = "cn/depth.onnx"', true],
      ["cn/depth.onnx_data", '[controlnet.depth] model = "cn/depth.onnx"', true],
      ["a/d.onnx", '[controlnet.depth] preprocessor = "a/d.onnx"', false],
      ["lora/b.safetensors", '[lora] files = "lora/b.safetensors"', true],
    ],
  );
  deepStrictEqual(needed.outside, []);
  const outside = neededFiles(
    { ...config, models: { ...config.models, base: "/elsewhere/x" } },
    [],
  );
  ok(outside.outside[0].startsWith('/elsewhere/x ([models] base = "/elsewhere/x") is outside'));
});
