import assert from "node:assert/strict";
import { join } from "node:path";
import {
  buildTinyLora,
  encodeSafetensors,
  lockEntry,
  lockText,
  parseLock,
} from "../model_builder/mod.ts";
import { copyDir } from "../../tests/helpers/copy_dir.ts";
import { readDerivedRecord } from "./derived.ts";
import { checkMergedModels, type MergeConfig, MERGED_DIR, prepareMergedModels } from "./merged.ts";

const FIXTURES = new URL("../../tests/fixtures/tiny/", import.meta.url).pathname;

/** A models root with the tiny `sd15/` set and LoRAs `a` (UNet modules only) and `none` (no module). */
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
  await Deno.mkdir(join(root, "lora"));
  await Deno.writeFile(join(root, "lora/a.safetensors"), a);
  await Deno.writeFile(join(root, "lora/none.safetensors"), none);
  const entries = parseLock(await Deno.readTextFile(join(FIXTURES, "models.lock")))
    .filter((e) => e.path.startsWith("sd15/"));
  entries.push(
    lockEntry("lora", "lora/a.safetensors", a),
    lockEntry("lora", "lora/none.safetensors", none),
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

    // Another weight is another key; the previous merge is kept as the one other, older ones go.
    const w5 = (await prepareMergedModels(config([{ path: "lora/a.safetensors", weight: 0.5 }])))!;
    assert.notEqual(w5.unet, first.unet);
    const w3 = (await prepareMergedModels(config([{ path: "lora/a.safetensors", weight: 0.3 }])))!;
    const unets = (await cached(root)).filter((n) => n.startsWith("unet-"));
    assert.deepEqual(unets.sort(), [w3.unet!, w5.unet!].map((p) => p.split("/").at(-2)!).sort());
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
