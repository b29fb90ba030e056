import assert from "node:assert/strict";
import { join } from "node:path";
import { FP32_CONVERTER_VERSION } from "../convert/mod.ts";
import { writeSmallModel } from "../convert/testing.ts";
import { lockEntry, lockText } from "../../tests/fixtures/builder/mod.ts";
import { randomTaesdWeights, taesdSafetensors } from "../convert/taesd_testing.ts";
import { checkConfiguredFiles, type CheckedConfig } from "./check.ts";
import { DERIVED_RECORD, readDerivedRecord } from "./derived.ts";
import { parseLock } from "./lock.ts";
import { sha256File } from "../bytes/mod.ts";
import { verifyConfiguredModels } from "./startup.ts";

const BASE = "sd15-fp32-derived";

/** The `[[derived]]` tables of a derived fp32 set made from `sd15/`, and the TAESD decoder. */
export const DERIVED_TOML = [
  ["text_encoder", "fp32", ["sd15/text_encoder/model.onnx"]],
  ["unet", "fp32", ["sd15/unet/model.onnx", "sd15/unet/weights.pb"]],
  ["vae_encoder", "fp32", ["sd15/vae_encoder/model.onnx"]],
  ["tokenizer", "copy", ["sd15/tokenizer/vocab.json", "sd15/tokenizer/merges.txt"]],
  ["scheduler", "copy", ["sd15/scheduler/scheduler_config.json"]],
].map(([c, conv, from]) =>
  `[[derived]]\ncomponent = "${c}"\npath = "${BASE}/${c}"\nconverter = "${conv}"\nfrom = ${
    JSON.stringify(from)
  }\n`
).join("\n") +
  `\n[[derived]]\ncomponent = "vae_decoder"\npath = "taesd/vae_decoder"\nconverter = "taesd"\n` +
  `from = ["taesd/taesd_decoder.safetensors"]\n`;

/** A models root with a small fp16 `sd15/` set, a TAESD safetensors and a lock deriving from them. */
async function fixture(): Promise<{ root: string; config: CheckedConfig }> {
  const root = await Deno.makeTempDir({ prefix: "sd15-derived-" });
  const files: Array<[string, string]> = [];
  const model = async (sub: string, location?: string) => {
    for (const name of await writeSmallModel(join(root, "sd15", sub), { location })) {
      files.push([sub, `sd15/${sub}/${name}`]);
    }
  };
  await model("text_encoder");
  await model("unet", "weights.pb");
  await model("vae_encoder");
  await Deno.mkdir(join(root, "sd15/tokenizer"), { recursive: true });
  await Deno.mkdir(join(root, "sd15/scheduler"), { recursive: true });
  await Deno.writeTextFile(join(root, "sd15/tokenizer/vocab.json"), '{"a</w>": 0}');
  await Deno.writeTextFile(join(root, "sd15/tokenizer/merges.txt"), "#version: 0.2\n");
  await Deno.writeTextFile(join(root, "sd15/scheduler/scheduler_config.json"), "{}");
  files.push(["tokenizer", "sd15/tokenizer/vocab.json"], [
    "tokenizer",
    "sd15/tokenizer/merges.txt",
  ]);
  files.push(["scheduler", "sd15/scheduler/scheduler_config.json"]);
  await Deno.mkdir(join(root, "taesd"));
  await Deno.writeFile(
    join(root, "taesd/taesd_decoder.safetensors"),
    taesdSafetensors(randomTaesdWeights(3)),
  );
  files.push(["vae_decoder", "taesd/taesd_decoder.safetensors"]);
  const entries = [];
  for (const [component, path] of files) {
    entries.push(
      lockEntry(component as "unet", path, await Deno.readFile(join(root, path))),
    );
  }
  await Deno.writeTextFile(join(root, "models.lock"), lockText(entries) + "\n" + DERIVED_TOML);
  const none = { enabled: false, model: "", preprocessor: "", detector: "", estimator: "" };
  return {
    root,
    config: {
      models: {
        root,
        lock: join(root, "models.lock"),
        base: join(root, BASE),
        controlnetUnet: join(root, "none.onnx"),
        vaeDecoder: "tiny",
        tinyVaeDecoder: join(root, "taesd/vae_decoder/model.onnx"),
      },
      controlnet: { depth: none, openpose: none, inpaint: none },
    },
  };
}

const states = async (config: CheckedConfig) =>
  Object.fromEntries((await checkConfiguredFiles(config)).files.map((f) => [f.path, f.state]));

Deno.test("derived files: listed with their inputs, built at start-up, then verified from the record", async () => {
  const { root, config } = await fixture();
  try {
    const before = await checkConfiguredFiles(config);
    const rows = Object.fromEntries(before.files.map((f) => [f.path, f]));
    // The inputs come first and are pinned; the derived files wait to be built.
    assert.equal(rows["sd15/unet/weights.pb"].state, "ok");
    assert.equal(rows[`${BASE}/unet/weights.pb`].state, "not built");
    assert.match(rows[`${BASE}/unet/model.onnx`].detail!, /run `deno task models` to build it/);
    assert.equal(rows["taesd/vae_decoder/model.onnx"].state, "not built");
    assert.ok(!(`${BASE}/vae_decoder/model.onnx` in rows), "the tiny VAE replaces the set's own");
    assert.equal(before.derived.length, 6);

    await verifyConfiguredModels(config);
    assert.ok(
      Object.values(await states(config)).every((s) => s === "ok"),
      JSON.stringify(await states(config)),
    );
    const record = (await readDerivedRecord(join(root, BASE, "unet")))!;
    assert.deepEqual(record.files.map((f) => f.name), ["model.onnx", "weights.pb"]);
    for (const f of record.files) {
      assert.equal(f.sha256, await sha256File(join(root, BASE, "unet", f.name)));
    }
    const lock = parseLock(await Deno.readTextFile(config.models.lock));
    assert.deepEqual(
      record.recipe.inputs,
      ["sd15/unet/model.onnx", "sd15/unet/weights.pb"].map((p) => ({
        path: p,
        sha256: lock.files.find((e) => e.path === p)!.sha256,
      })),
    );
    // Verified again without building: the record is reused.
    const stamp = (await Deno.stat(join(root, BASE, "unet/weights.pb"))).mtime!.getTime();
    await verifyConfiguredModels(config);
    assert.equal((await Deno.stat(join(root, BASE, "unet/weights.pb"))).mtime!.getTime(), stamp);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("derived files: a changed, a truncated and a stale derived file are found and rebuilt", async () => {
  const { root, config } = await fixture();
  try {
    await verifyConfiguredModels(config);
    const weights = join(root, BASE, "unet/weights.pb");
    const good = await sha256File(weights);
    // Same size, one byte changed.
    const bytes = await Deno.readFile(weights);
    bytes[100] ^= 0xff;
    await Deno.writeFile(weights, bytes);
    assert.equal((await states(config))[`${BASE}/unet/weights.pb`], "wrong hash");
    await verifyConfiguredModels(config);
    assert.equal(await sha256File(weights), good);

    // Truncated.
    const taesd = join(root, "taesd/vae_decoder/model.onnx");
    const taesdHash = await sha256File(taesd);
    await Deno.truncate(taesd, 1000);
    const check = await checkConfiguredFiles(config);
    const row = check.files.find((f) => f.path === "taesd/vae_decoder/model.onnx")!;
    assert.equal(row.state, "wrong size");
    assert.match(row.detail!, /is 1,000 bytes, the build wrote/);
    await verifyConfiguredModels(config);
    assert.equal(await sha256File(taesd), taesdHash);

    // A record made from other inputs (or by another converter version) is stale.
    const recordPath = join(root, BASE, "text_encoder", DERIVED_RECORD);
    const record = JSON.parse(await Deno.readTextFile(recordPath));
    record.key = "0".repeat(64);
    record.recipe.version = 0;
    await Deno.writeTextFile(recordPath, JSON.stringify(record));
    const stale = (await checkConfiguredFiles(config)).files.find((f) =>
      f.path === `${BASE}/text_encoder/model.onnx`
    )!;
    assert.equal(stale.state, "stale");
    assert.ok(
      stale.detail!.includes(`fp32 v0 → v${FP32_CONVERTER_VERSION}`),
      stale.detail!,
    );
    await verifyConfiguredModels(config);
    assert.equal((await states(config))[`${BASE}/text_encoder/model.onnx`], "ok");

    // An interrupted build of a process that died is swept at the next build.
    const dead = join(root, BASE, "unet.building-999999999-x");
    await Deno.mkdir(dead);
    await Deno.remove(weights);
    await verifyConfiguredModels(config);
    await assert.rejects(Deno.stat(dead), Deno.errors.NotFound);
    assert.equal(await sha256File(weights), good);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("derived files: a missing input stops start-up naming the input and the download", async () => {
  const { root, config } = await fixture();
  try {
    await Deno.remove(join(root, "sd15/unet/weights.pb"));
    await assert.rejects(verifyConfiguredModels(config), (e: Error) => {
      assert.match(e.message, /sd15\/unet\/weights\.pb .*missing/);
      assert.match(
        e.message,
        /sd15-fp32-derived\/unet\/model\.onnx .*its inputs are not in place \(sd15\/unet\/weights\.pb\)/,
      );
      return true;
    });
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("models.lock [[derived]]: inputs must be [[file]] paths and fit the converter", () => {
  const file = lockText([lockEntry("unet", "a/model.onnx", new Uint8Array([1]))]);
  const derived = (from: string, converter = "fp32", path = "b") =>
    `${file}\n[[derived]]\ncomponent = "unet"\npath = "${path}"\nconverter = "${converter}"\nfrom = ${from}\n`;
  assert.deepEqual(parseLock(derived('["a/model.onnx"]')).derived[0].outputs, ["b/model.onnx"]);
  assert.throws(
    () => parseLock(derived('["a/x.onnx"]')),
    /field "from" must name \[\[file\]\] paths of this lock \("a\/x\.onnx" is not one\)/,
  );
  assert.throws(
    () => parseLock(derived('["a/model.onnx"]', "magic")),
    /field "converter" must be one of fp32\|taesd\|copy/,
  );
  assert.throws(
    () => parseLock(derived('["a/model.onnx"]', "taesd")),
    /does not fit converter "taesd"/,
  );
  assert.throws(
    () => parseLock(derived('["a/model.onnx"]', "fp32", "a")),
    /the \[\[file\]\] "a\/model\.onnx" lies inside this derived folder/,
  );
});
