import { deepStrictEqual, doesNotThrow, throws } from "node:assert";
import type { LockEntry } from "./lock.ts";
import { componentsFor, configModelPaths, requireLocked, toLockPath } from "./required.ts";

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
