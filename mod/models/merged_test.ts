import assert from "node:assert/strict";
import { join } from "node:path";
import {
  buildTinyLora,
  encodeSafetensors,
  lockEntry,
  lockText,
  parseLock,
} from "../../tests/fixtures/builder/mod.ts";
import { copyDir } from "../../tests/helpers/copy_dir.ts";
import { readDerivedRecord } from "./derived.ts";
import {
  checkMergedModels,
  type MergeConfig,
  MERGED_DIR,
  type MergedPaths,
  prepareMergedModels,
} from "./merged.ts";

const FIXTURES = new URL("../../tests/fixtures/tiny/", import.meta.url).pathname;

/**
 * A models root with the tiny `sd15/` set and LoRAs `a` (UNet modules only),
 * `lcm` and `hyper` (stand-ins for the two presets' LoRAs) and `none` (no module).
 */
async function fixture() {
  const root = await Deno.makeTempDir({ prefix: "sd15-merged-" });
  await copyDir(join(FIXTURES, "models/sd15"), join(root, "sd15"));
  const a = buildTinyLora(5, { rank: 2, targets: "unet" });
  const none = encodeSafetensors([
    {
      name: "lora_unet_nowhere.lora_down.weight",
      dtype: "F32",
      shape: [1, 4],
      data: new Float32Array(4),
    },
    {
      name: "lora_unet_nowhere.lora_up.weight",
      dtype: "F32",
      shape: [4, 1],
      data: new Float32Array(4),
    },
  ]);
  const lcm = buildTinyLora(6, { rank: 2, targets: "unet" });
  const hyper = buildTinyLora(7, { rank: 2, targets: "unet", dtype: "F32" });
  await Deno.mkdir(join(root, "lora"));
  await Deno.writeFile(join(root, "lora/a.safetensors"), a);
  await Deno.writeFile(join(root, "lora/none.safetensors"), none);
  await Deno.writeFile(join(root, "lora/lcm.safetensors"), lcm);
  await Deno.writeFile(join(root, "lora/hyper.safetensors"), hyper);
  const entries = parseLock(await Deno.readTextFile(join(FIXTURES, "models.lock")))
    .filter((e) => e.path.startsWith("sd15/"));
  entries.push(
    lockEntry("lora", "lora/a.safetensors", a),
    lockEntry("lora", "lora/none.safetensors", none),
    lockEntry("lora", "lora/lcm.safetensors", lcm),
    lockEntry("lora", "lora/hyper.safetensors", hyper),
  );
  await Deno.writeTextFile(join(root, "models.lock"), lockText(entries));
  const off = { enabled: false, model: "", preprocessor: "", detector: "", estimator: "" };
  const config = (files: Array<{ path: string; weight: number }>): MergeConfig => ({
    models: {
      root,
      lock: join(root, "models.lock"),
      base: join(root, "sd15"),
      controlnetUnet: join(root, "sd15/controlnet_unet/model.onnx"),
      vaeDecoder: "full",
      tinyVaeDecoder: "",
    },
    controlnet: { depth: off, openpose: off, inpaint: off },
    lora: { files: files.map((f) => ({ ...f, path: join(root, f.path) })) },
  });
  return { root, config };
}

async function cached(root: string): Promise<string[]> {
  const names: string[] = [];
  for await (const e of Deno.readDir(join(root, MERGED_DIR))) if (e.isDirectory) names.push(e.name);
  return names.sort();
}

Deno.test("merged-LoRA cache: keyed by model, LoRA and weight; reused; a text encoder no module hits stays the base's", async () => {
  const { root, config } = await fixture();
  try {
    const a08 = config([{ path: "lora/a.safetensors", weight: 0.8 }]);
    // `models check` reports the merges before they exist, and builds nothing.
    assert.deepEqual((await checkMergedModels(a08)).map((m) => [m.model, m.state]), [
      ["sd15/text_encoder/model.onnx", "not built"],
      ["sd15/unet/model.onnx", "not built"],
    ]);
    const first = (await prepareMergedModels(a08))!;
    const checked = await checkMergedModels(a08);
    assert.deepEqual(checked.map((m) => m.state), ["ok", "ok"]);
    assert.match(checked[0].detail, /opened unchanged/);
    assert.equal(
      first.textEncoder,
      undefined,
      "no lora_te_ module: the text encoder is opened as it is",
    );
    assert.match(first.unet!, /\/\.merged\/unet-[0-9a-f]{16}\/model\.onnx$/);
    const unetDir = join(first.unet!, "..");
    const record = (await readDerivedRecord(unetDir))!;
    assert.equal(record.recipe.converter, "lora-merge");
    assert.deepEqual(record.recipe.params, { target: "unet", weights: [0.8] });
    assert.deepEqual(record.recipe.inputs.map((i) => i.path), [
      "sd15/unet/model.onnx",
      "sd15/unet/weights.pb",
      "lora/a.safetensors",
    ]);
    assert.deepEqual(record.files.map((f) => f.name), ["model.onnx", "weights.pb"]);
    const built = record.builtAt;

    // Same inputs: the same folder, not built again.
    const again =
      (await prepareMergedModels(config([{ path: "lora/a.safetensors", weight: 0.8 }])))!;
    assert.equal(again.unet, first.unet);
    assert.equal((await readDerivedRecord(unetDir))!.builtAt, built);

    // Another weight is another key; the two most recently used others are kept, older ones go.
    const w5 = (await prepareMergedModels(config([{ path: "lora/a.safetensors", weight: 0.5 }])))!;
    assert.notEqual(w5.unet, first.unet);
    const w3 = (await prepareMergedModels(config([{ path: "lora/a.safetensors", weight: 0.3 }])))!;
    const folders = (...p: MergedPaths[]) => p.map((m) => m.unet!.split("/").at(-2)!).sort();
    const unets = async () => (await cached(root)).filter((n) => n.startsWith("unet-")).sort();
    assert.deepEqual(await unets(), folders(first, w5, w3));
    // Using 0.8 again renews it, so the next new key pushes out 0.5, the least recently used.
    await new Promise((r) => setTimeout(r, 20));
    assert.equal((await prepareMergedModels(a08))!.unet, first.unet);
    assert.equal((await readDerivedRecord(unetDir))!.builtAt, built, "reused, not rebuilt");
    await new Promise((r) => setTimeout(r, 20));
    const w2 = (await prepareMergedModels(config([{ path: "lora/a.safetensors", weight: 0.2 }])))!;
    assert.deepEqual(await unets(), folders(first, w3, w2));
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("merged-LoRA cache: a LoRA that matches nothing fails start-up naming it, cached or not", async () => {
  const { root, config } = await fixture();
  try {
    const files = [{ path: "lora/none.safetensors", weight: 1 }];
    for (let i = 0; i < 2; i++) {
      await assert.rejects(
        prepareMergedModels(config(files)),
        /LoRA .*none\.safetensors: none of its 1 modules .*matches a node/,
      );
    }
    assert.equal(await prepareMergedModels(config([])), undefined);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("merged-LoRA cache: switching between the presets' LoRA sets merges each once, with or without your own LoRA", async () => {
  const { root, config } = await fixture();
  try {
    const style = { path: "lora/a.safetensors", weight: 0.7 };
    // quality with your LoRA, fast (the LCM LoRA appended), turbo (the Hyper-SD LoRA appended).
    const presets = {
      quality: [style],
      fast: [style, { path: "lora/lcm.safetensors", weight: 1 }],
      turbo: [style, { path: "lora/hyper.safetensors", weight: 1 }],
    };
    const first: Record<string, string> = {};
    for (const [name, files] of Object.entries(presets)) {
      first[name] = (await prepareMergedModels(config(files)))!.unet!;
    }
    const builtAt = async (unet: string) => (await readDerivedRecord(join(unet, "..")))!.builtAt;
    const stamps = await Promise.all(Object.values(first).map(builtAt));
    // Any order of switching afterwards reuses the three merges.
    for (const name of ["fast", "quality", "turbo", "fast", "turbo", "quality"] as const) {
      assert.equal((await prepareMergedModels(config(presets[name])))!.unet, first[name], name);
    }
    assert.deepEqual(await Promise.all(Object.values(first).map(builtAt)), stamps);
    // Without your own LoRA: fast and turbo merge, quality opens the base set (no LoRA at all).
    const fast = (await prepareMergedModels(config([presets.fast[1]])))!.unet!;
    const turbo = (await prepareMergedModels(config([presets.turbo[1]])))!.unet!;
    assert.equal(await prepareMergedModels(config([])), undefined);
    assert.equal((await prepareMergedModels(config([presets.fast[1]])))!.unet, fast);
    assert.equal((await prepareMergedModels(config([presets.turbo[1]])))!.unet, turbo);
    const unets = (await cached(root)).filter((n) => n.startsWith("unet-"));
    assert.equal(unets.length, 3, "the current merge and the two most recently used others");
    assert.ok(unets.includes(fast.split("/").at(-2)!) && unets.includes(turbo.split("/").at(-2)!));
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});
