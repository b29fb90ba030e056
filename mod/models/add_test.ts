import { deepStrictEqual, ok, rejects, strictEqual } from "node:assert";
import { join } from "node:path";
import onnx from "onnx-proto";
import { buildTinyLora, parseLock } from "../../tests/fixtures/builder/mod.ts";
import { AddError, addModels } from "./add.ts";
import { readModelsLock } from "./lock.ts";
import { ADDED_MARK } from "./lock_write.ts";
import { loadVerifyCache } from "./verify_cache.ts";
import { copyDir } from "../../tests/helpers/copy_dir.ts";

const FIXTURES = new URL("../../tests/fixtures/tiny/", import.meta.url).pathname;
const TINY = join(FIXTURES, "models");
const SHIPPED_LOCK = new URL("../../models.lock", import.meta.url).pathname;

/** A temp folder with `models/` and a copy of the shipped models.lock. */
async function workspace(): Promise<
  { dir: string; root: string; lock: string; done(): Promise<void> }
> {
  const dir = await Deno.makeTempDir({ prefix: "models_add_" });
  const root = join(dir, "models");
  await Deno.mkdir(root);
  const lock = join(dir, "models.lock");
  await Deno.copyFile(SHIPPED_LOCK, lock);
  return { dir, root, lock, done: () => Deno.remove(dir, { recursive: true }) };
}

const fixtureEntries = async () =>
  parseLock(await Deno.readTextFile(join(FIXTURES, "models.lock")));

for (
  const [set, flavour] of [
    ["sd15", "diffusers script layout, fp32 I/O"],
    ["sd15-fp16", "diffusers script layout, fp16 I/O"],
    ["sd15-optimum", "Optimum layout, fp32 I/O"],
    ["sd15-optimum-scalar", "Optimum layout, fp32 I/O"],
    ["sd15-lcm", "Optimum layout, fp32 I/O, LCM UNet (timestep_cond)"],
  ] as const
) {
  Deno.test(`models add: the tiny ${set} set is locked as local files (${flavour})`, async () => {
    const w = await workspace();
    try {
      await copyDir(join(TINY, set), join(w.root, "mine"));
      const before = await Deno.readTextFile(w.lock);
      const result = await addModels({
        target: join(w.root, "mine"),
        root: w.root,
        lock: w.lock,
        progress: false,
      });
      strictEqual(result.check.flavour, flavour);
      // Same files, sizes and hashes as the builder's own lock, under the new folder, no url.
      const expected = (await fixtureEntries())
        .filter((e) => e.path.startsWith(`${set}/`))
        .map((e) => ({
          component: e.component,
          path: `mine/${e.path.slice(set.length + 1)}`,
          size: e.size,
          sha256: e.sha256,
        }))
        .sort((a, b) => a.path.localeCompare(b.path));
      deepStrictEqual([...result.entries].sort((a, b) => a.path.localeCompare(b.path)), expected);
      // The shipped lock is not touched: the entries go to its local overlay, read over it.
      strictEqual(await Deno.readTextFile(w.lock), before, "models.lock unchanged");
      strictEqual(result.lockFile, join(w.dir, "models.local.lock"));
      const overlay = await Deno.readTextFile(result.lockFile);
      ok(overlay.includes(ADDED_MARK));
      const parsed = await readModelsLock(w.lock);
      deepStrictEqual(
        parsed.filter((e) => e.path.startsWith("mine/")).map((e) => e.url),
        expected.map(() => undefined),
      );
      strictEqual(parsed.length, (await readModelsLock(SHIPPED_LOCK)).length + expected.length);
      // The hashes are cached, so start-up does not hash again.
      const cache = await loadVerifyCache(join(w.root, ".verified.json"));
      for (const e of expected) strictEqual(cache.files[e.path]?.sha256, e.sha256, e.path);
      const edits = result.edits.map((e) => `[${e.section}] ${e.key} = ${e.value}`);
      deepStrictEqual(
        edits,
        set === "sd15"
          ? [
            '[models] base = "mine"',
            '[models] controlnet_unet = "mine/controlnet_unet/model.onnx"',
          ]
          : ['[models] base = "mine"'],
      );
      // Adding again replaces the entries instead of duplicating them, and hashes nothing.
      const again = await addModels({
        target: join(w.root, "mine"),
        root: w.root,
        lock: w.lock,
        progress: false,
      });
      strictEqual(again.replaced, expected.length);
      strictEqual(again.hashed, 0);
      strictEqual((await readModelsLock(w.lock)).length, parsed.length);
      strictEqual(
        (await Deno.readTextFile(result.lockFile)).split(ADDED_MARK).length,
        2,
        "one group",
      );
      strictEqual(await Deno.readTextFile(w.lock), before, "models.lock still unchanged");
    } finally {
      await w.done();
    }
  });
}

/** Copies the tiny diffusers set into `mine`, lets `spoil` damage it, and expects a refusal. */
async function refused(
  spoil: (dir: string) => Promise<void>,
  reason: RegExp,
): Promise<void> {
  const w = await workspace();
  try {
    const dir = join(w.root, "mine");
    await copyDir(join(TINY, "sd15"), dir);
    await spoil(dir);
    const before = await Deno.readTextFile(w.lock);
    await rejects(
      addModels({ target: dir, root: w.root, lock: w.lock, progress: false }),
      (e: Error) => {
        ok(e instanceof AddError, String(e));
        ok(reason.test(e.message), e.message);
        ok(e.message.includes("nothing was written"), e.message);
        return true;
      },
    );
    strictEqual(await Deno.readTextFile(w.lock), before, "the lock is untouched");
    await rejects(Deno.stat(join(w.dir, "models.local.lock")), Deno.errors.NotFound);
  } finally {
    await w.done();
  }
}

Deno.test("models add: a text encoder with a float input_ids is refused with the port and dtype", async () => {
  await refused(
    async (dir) => {
      const path = join(dir, "text_encoder/model.onnx");
      const model = onnx.onnx.ModelProto.decode(await Deno.readFile(path));
      model.graph!.input![0].type!.tensorType!.elemType = onnx.onnx.TensorProto.DataType.FLOAT;
      await Deno.writeFile(path, onnx.onnx.ModelProto.encode(model).finish());
    },
    /text_encoder\/model\.onnx: text_encoder input `input_ids`: expected one of int32\/int64, got float32/,
  );
});

Deno.test("models add: a missing model file is refused and named", async () => {
  await refused(
    (dir) => Deno.remove(join(dir, "vae_decoder/model.onnx")),
    /vae_decoder\/model\.onnx: missing/,
  );
});

Deno.test("models add: a missing external data file is refused and named", async () => {
  await refused(
    (dir) => Deno.remove(join(dir, "unet/weights.pb")),
    /unet\/weights\.pb: missing \(unet\/model\.onnx keeps \d+ weight tensors in it/,
  );
});

Deno.test("models add: a truncated external data file is refused with both sizes", async () => {
  await refused(async (dir) => {
    const path = join(dir, "unet/weights.pb");
    const bytes = await Deno.readFile(path);
    await Deno.writeFile(path, bytes.subarray(0, bytes.length - 100));
  }, /unet\/weights\.pb: truncated: [\d,]+ bytes, but unet\/model\.onnx reads up to byte [\d,]+/);
});

Deno.test("models add: a truncated model file is refused", async () => {
  await refused(async (dir) => {
    const path = join(dir, "text_encoder/model.onnx");
    const bytes = await Deno.readFile(path);
    await Deno.writeFile(path, bytes.subarray(0, 5000));
  }, /text_encoder\/model\.onnx: truncated or not an ONNX model/);
});

Deno.test("models add: a folder outside the models root is refused with the fix", async () => {
  const w = await workspace();
  try {
    await copyDir(join(TINY, "sd15"), join(w.dir, "elsewhere"));
    await rejects(
      addModels({ target: join(w.dir, "elsewhere"), root: w.root, lock: w.lock, progress: false }),
      /is not under the models root .*mv /,
    );
  } finally {
    await w.done();
  }
});

Deno.test("models add --component: ControlNet, annotator, LoRA and tiny VAE decoder files", async () => {
  const w = await workspace();
  try {
    await copyDir(join(TINY, "controlnet"), join(w.root, "cn"));
    await copyDir(join(TINY, "annotators"), join(w.root, "ann"));
    const cn = await addModels({
      target: join(w.root, "cn/depth.onnx"),
      component: "controlnet_depth",
      root: w.root,
      lock: w.lock,
      progress: false,
    });
    deepStrictEqual(cn.entries.map((e) => [e.component, e.path]), [[
      "controlnet_depth",
      "cn/depth.onnx",
    ]]);
    deepStrictEqual(cn.edits, [{
      section: "controlnet.depth",
      key: "model",
      value: '"cn/depth.onnx"',
    }]);
    const det = await addModels({
      target: join(w.root, "ann/yolox_l.onnx"),
      component: "pose_detector",
      root: w.root,
      lock: w.lock,
      progress: false,
    });
    deepStrictEqual(det.edits, [{
      section: "controlnet.openpose",
      key: "detector",
      value: '"ann/yolox_l.onnx"',
    }]);
    // An annotator is not a ControlNet: refused with the contract's reason.
    await rejects(
      addModels({
        target: join(w.root, "ann/depth.onnx"),
        component: "controlnet_inpaint",
        root: w.root,
        lock: w.lock,
        progress: false,
      }),
      /ann\/depth|depth\.onnx: controlnet input/,
    );
    await Deno.mkdir(join(w.root, "lora"));
    await Deno.writeFile(join(w.root, "lora/style.safetensors"), buildTinyLora(3));
    const lora = await addModels({
      target: join(w.root, "lora/style.safetensors"),
      component: "lora",
      root: w.root,
      lock: w.lock,
      progress: false,
    });
    deepStrictEqual(lora.entries.map((e) => [e.component, e.path]), [[
      "lora",
      "lora/style.safetensors",
    ]]);
    await Deno.writeTextFile(join(w.root, "lora/bad.safetensors"), "not a safetensors file");
    await rejects(
      addModels({
        target: join(w.root, "lora/bad.safetensors"),
        component: "lora",
        root: w.root,
        lock: w.lock,
        progress: false,
      }),
      /bad\.safetensors/,
    );
    // The diffusers/PEFT key layout, which the engine blends too, is accepted as well.
    await Deno.writeFile(
      join(w.root, "lora/peft.safetensors"),
      buildTinyLora(4, { layout: "peft", alpha: null }),
    );
    const peft = await addModels({
      target: join(w.root, "lora/peft.safetensors"),
      component: "lora",
      root: w.root,
      lock: w.lock,
      progress: false,
    });
    deepStrictEqual(peft.entries.map((e) => e.path), ["lora/peft.safetensors"]);
    // A tiny VAE (TAESD) decoder: locked as a vae_decoder file, and chosen by the config lines.
    await copyDir(join(TINY, "taesd"), join(w.root, "my-taesd"));
    const taesd = await addModels({
      target: join(w.root, "my-taesd/vae_decoder/model.onnx"),
      component: "tiny_vae_decoder",
      root: w.root,
      lock: w.lock,
      progress: false,
    });
    deepStrictEqual(taesd.entries.map((e) => [e.component, e.path]), [[
      "vae_decoder",
      "my-taesd/vae_decoder/model.onnx",
    ]]);
    deepStrictEqual(taesd.edits, [
      { section: "models", key: "tiny_vae_decoder", value: '"my-taesd/vae_decoder/model.onnx"' },
      { section: "models", key: "vae_decoder", value: '"tiny"' },
    ]);
    // A model without the VAE decoder's contract is refused, naming what is wrong.
    await rejects(
      addModels({
        target: join(w.root, "ann/yolox_l.onnx"),
        component: "tiny_vae_decoder",
        root: w.root,
        lock: w.lock,
        progress: false,
      }),
      /yolox_l\.onnx: vae_decoder/,
    );
    const paths = (await readModelsLock(w.lock)).map((e) => e.path);
    for (
      const p of [
        "cn/depth.onnx",
        "ann/yolox_l.onnx",
        "lora/style.safetensors",
        "my-taesd/vae_decoder/model.onnx",
      ]
    ) {
      ok(paths.includes(p), p);
    }
    ok(!paths.includes("lora/bad.safetensors"));
  } finally {
    await w.done();
  }
});
