import { deepStrictEqual, ok } from "node:assert";
import type { LockEntry } from "./lock.ts";
import { neededFiles, toLockPath } from "./required.ts";

const e = (path: string): LockEntry => ({
  component: "unet",
  path,
  url: "fixture://x",
  size: 1,
  sha256: "0".repeat(64),
});

Deno.test("toLockPath: absolute under the root or root-relative, in lock form", () => {
  deepStrictEqual(toLockPath("/m/a/b.onnx", "/m"), "a/b.onnx");
  deepStrictEqual(toLockPath("./a/b.onnx", "/m"), "a/b.onnx");
  deepStrictEqual(toLockPath("/elsewhere/x.onnx", "/m"), "../elsewhere/x.onnx");
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
    models: {
      root: "/m",
      base: "/m/mine",
      controlnetUnet: "/m/mine/controlnet_unet/model.onnx",
      vaeDecoder: "full" as const,
      tinyVaeDecoder: "/m/taesd/vae_decoder/model.onnx",
    },
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

Deno.test('neededFiles: vae_decoder = "tiny" needs the tiny decoder instead of the set\'s own', () => {
  const at = (component: LockEntry["component"], path: string): LockEntry => ({
    ...e(path),
    component,
  });
  const entries = [
    at("vae_decoder", "sd15/vae_decoder/model.onnx"),
    at("vae_decoder", "sd15/vae_decoder/model.onnx_data"),
    at("vae_decoder", "taesd/vae_decoder/model.onnx"),
  ];
  const off = { enabled: false, model: "/m/x", preprocessor: "/m/y" };
  const config = (vaeDecoder: "full" | "tiny") => ({
    models: {
      root: "/m",
      base: "/m/sd15",
      controlnetUnet: "/m/sd15/controlnet_unet/model.onnx",
      vaeDecoder,
      tinyVaeDecoder: "/m/taesd/vae_decoder/model.onnx",
    },
    controlnet: {
      depth: off,
      openpose: { enabled: false, model: "/m/x", detector: "/m/y", estimator: "/m/z" },
      inpaint: { enabled: false, model: "/m/x" },
    },
  });
  const vae = (c: ReturnType<typeof config>) =>
    neededFiles(c, entries).files.map((f) => f.path).filter((p) => p.includes("vae_decoder"));
  deepStrictEqual(vae(config("full")), [
    "sd15/vae_decoder/model.onnx",
    "sd15/vae_decoder/model.onnx_data",
  ]);
  deepStrictEqual(vae(config("tiny")), ["taesd/vae_decoder/model.onnx"]);
});

Deno.test("neededFiles: [models] vae replaces the base set's VAE files (the decoder only when not tiny)", () => {
  const at = (component: LockEntry["component"], path: string): LockEntry => ({
    ...e(path),
    component,
  });
  const entries = [
    at("vae_decoder", "sd15/vae_decoder/model.onnx"),
    at("vae_encoder", "sd15/vae_encoder/model.onnx"),
    at("vae_decoder", "vae/own.safetensors"),
  ];
  const derived = [{
    component: "vae_decoder" as const,
    path: "converted/vae/own-fp32",
    converter: "sd15-vae",
    from: ["vae/own.safetensors"],
    options: { precision: "fp32" },
    outputs: ["vae_decoder/model.onnx", "vae_encoder/model.onnx"].map((n) =>
      `converted/vae/own-fp32/${n}`
    ),
  }];
  const config = (vaeDecoder: "full" | "tiny") => ({
    models: {
      root: "/m",
      base: "/m/sd15",
      controlnetUnet: "/m/sd15/controlnet_unet/model.onnx",
      vaeDecoder,
      tinyVaeDecoder: "/m/taesd/vae_decoder/model.onnx",
      vae: "/m/converted/vae/own-fp32",
    },
    controlnet: {
      depth: { enabled: false, model: "/m/x", preprocessor: "/m/y" },
      openpose: { enabled: false, model: "/m/x", detector: "/m/y", estimator: "/m/z" },
      inpaint: { enabled: false, model: "/m/x" },
    },
  });
  const vaeKey = '[models] vae = "converted/vae/own-fp32"';
  const paths = (vaeDecoder: "full" | "tiny") =>
    neededFiles(config(vaeDecoder), entries, derived).files
      .filter((f) => /vae/.test(f.path)).map((f) => [f.path, f.key]);
  deepStrictEqual(paths("full"), [
    ["vae/own.safetensors", vaeKey],
    ["converted/vae/own-fp32/vae_decoder/model.onnx", vaeKey],
    ["converted/vae/own-fp32/vae_encoder/model.onnx", vaeKey],
  ]);
  // With the tiny decoder the set's folder is still needed for its encoder (one derived folder).
  deepStrictEqual(paths("tiny").filter(([p]) => p.startsWith("sd15/")), []);
  ok(paths("tiny").some(([p]) => p === "taesd/vae_decoder/model.onnx"));
});
