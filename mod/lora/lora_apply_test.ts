/**
 * LoRA blending on the tiny model set with real ONNX Runtime sessions: the
 * patched weights against W + ΔWᵀ computed here independently, outputs with
 * and without LoRAs, and the start-up errors.
 */
import { deepStrictEqual, fail, notDeepStrictEqual, ok, rejects, strictEqual } from "node:assert";
import { dirname, join } from "node:path";
import onnx from "onnx-proto";
import {
  buildTinyLora,
  encodeSafetensors,
  lockEntry,
  lockText,
  parseLock,
  TEXT_ENCODER_SCOPES,
  UNET_SCOPES,
} from "../../tests/fixtures/builder/mod.ts";
import { verifyConfiguredModels } from "../models/mod.ts";
import { fill, tmpfsUnavailable } from "../../tests/helpers/tmpfs.ts";
import { createSession, type Feeds, type Session, Tensor } from "../onnx/mod.ts";
import { differingBytes, tinyConfig, tinyModels } from "../pipeline/_testing.ts";
import { createEngine } from "../pipeline/mod.ts";
import { loadModels, releaseModels } from "../pipeline/load_models.ts";
import type { GenerationRequest } from "../pipeline/types.ts";
import { kohyaModules } from "./kohya_keys.ts";
import { LoraSet } from "./lora_set.ts";
import { patchModel } from "./onnx_patch.ts";
import { parseSafetensors } from "./safetensors.ts";
import { ignoredFor } from "../../tests/helpers/ignore.ts";

const root = await tinyModels("lora");
const unetPath = join(root, "sd15", "unet", "model.onnx");
const tePath = join(root, "sd15", "text_encoder", "model.onnx");
const loraDir = join(root, "lora");
await Deno.mkdir(loraDir, { recursive: true });
const SESSION = { intraOpThreads: 1, interOpThreads: 1 } as const;

async function writeLora(name: string, bytes: Uint8Array): Promise<string> {
  const path = join(loraDir, name);
  await Deno.writeFile(path, bytes);
  return path;
}

const values = (n: number, phase: number) =>
  Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37 + phase) * 0.3);

/** The initializer feeding input `index` of the node called `nodeName`, read from the files. */
async function initializerOf(
  modelPath: string,
  nodeName: string,
  index: number,
): Promise<{ name: string; dims: number[]; offset: number; values: Float32Array }> {
  const model = onnx.onnx.ModelProto.decode(await Deno.readFile(modelPath));
  const node = model.graph!.node!.find((n) => n.name === nodeName);
  ok(node, `no node ${nodeName}`);
  const init = model.graph!.initializer!.find((t) => t.name === node.input![index])!;
  const kv = Object.fromEntries(init.externalData!.map((e) => [e.key, e.value]));
  strictEqual(kv.location, "weights.pb");
  const offset = Number(kv.offset);
  const file = await Deno.readFile(join(dirname(modelPath), "weights.pb"));
  const dims = init.dims!.map(Number);
  const n = dims.reduce((a, b) => a * b, 1);
  const view = new DataView(file.buffer, offset, 4 * n);
  return {
    name: init.name!,
    dims,
    offset,
    values: Float32Array.from({ length: n }, (_, i) => view.getFloat32(4 * i, true)),
  };
}

function readF32(bytes: Uint8Array, offset: number, n: number): Float32Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset + offset, 4 * n);
  return Float32Array.from({ length: n }, (_, i) => view.getFloat32(4 * i, true));
}

function assertClose(actual: Float32Array, expected: Float32Array, what: string): void {
  strictEqual(actual.length, expected.length, what);
  for (let i = 0; i < actual.length; i++) {
    ok(Math.abs(actual[i] - expected[i]) <= 1e-5, `${what}[${i}]: ${actual[i]} vs ${expected[i]}`);
  }
}

Deno.test("patchModel: MatMul and Conv weights become W + (up@down·alpha/rank·weight)ᵀ", async () => {
  const rank = 2, alpha = 3, weight = 0.7;
  const D = 32, C0 = 8; // TINY_DIMS hidden size and first block width
  const mm = { down: values(rank * D, 1), up: values(C0 * rank, 2) }; // Linear D→C0
  const cv = { down: values(rank * 4 * 9, 3), up: values(C0 * rank, 4) }; // Conv 4→C0, 3×3
  const path = await writeLora(
    "exact.safetensors",
    encodeSafetensors([
      {
        name: "lora_unet_conv_in.lora_down.weight",
        dtype: "F32",
        shape: [rank, 4, 3, 3],
        data: cv.down,
      },
      {
        name: "lora_unet_conv_in.lora_up.weight",
        dtype: "F32",
        shape: [C0, rank, 1, 1],
        data: cv.up,
      },
      { name: "lora_unet_conv_in.alpha", dtype: "F32", shape: [], data: Float32Array.of(alpha) },
      {
        name:
          "lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn2_to_k.lora_down.weight",
        dtype: "F32",
        shape: [rank, D],
        data: mm.down,
      },
      {
        name: "lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn2_to_k.lora_up.weight",
        dtype: "F32",
        shape: [C0, rank],
        data: mm.up,
      },
      {
        name: "lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn2_to_k.alpha",
        dtype: "F32",
        shape: [],
        data: Float32Array.of(alpha),
      },
    ]),
  );
  const { modules } = kohyaModules(parseSafetensors(await Deno.readFile(path), path), path);
  const patched = await patchModel(unetPath, "unet", [{ path, weight, modules }], {
    scratch: "memory",
  });
  ok(patched);
  deepStrictEqual([...patched.matched[0]].sort(), [
    "lora_unet_conv_in",
    "lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn2_to_k",
  ]);
  deepStrictEqual(patched.externalData.map((f) => f.path), ["weights.pb"]);
  const weights = patched.externalData[0].data;
  const scale = weight * alpha / rank;

  // MatMul: ONNX stores the Linear weight [in=D, out=C0]; torch ΔW is [out, in].
  const w = await initializerOf(unetPath, `/${UNET_SCOPES.textProj}/MatMul`, 1);
  deepStrictEqual(w.dims, [D, C0]);
  const expectedMm = new Float32Array(D * C0);
  for (let i = 0; i < D; i++) {
    for (let o = 0; o < C0; o++) {
      let s = 0;
      for (let r = 0; r < rank; r++) s += mm.up[o * rank + r] * mm.down[r * D + i];
      expectedMm[i * C0 + o] = w.values[i * C0 + o] + s * scale;
    }
  }
  assertClose(readF32(weights, w.offset, D * C0), expectedMm, "to_k");

  // Conv: ONNX and torch agree on [out, in, kh, kw].
  const c = await initializerOf(unetPath, `/${UNET_SCOPES.convIn}/Conv`, 1);
  deepStrictEqual(c.dims, [C0, 4, 3, 3]);
  const expectedCv = new Float32Array(C0 * 36);
  for (let o = 0; o < C0; o++) {
    for (let k = 0; k < 36; k++) {
      let s = 0;
      for (let r = 0; r < rank; r++) s += cv.up[o * rank + r] * cv.down[r * 36 + k];
      expectedCv[o * 36 + k] = c.values[o * 36 + k] + s * scale;
    }
  }
  assertClose(readF32(weights, c.offset, C0 * 36), expectedCv, "conv_in");

  // Every other byte of weights.pb is untouched.
  const original = await Deno.readFile(join(dirname(unetPath), "weights.pb"));
  strictEqual(weights.length, original.length);
  const touched = (i: number) =>
    (i >= w.offset && i < w.offset + 4 * D * C0) || (i >= c.offset && i < c.offset + 4 * C0 * 36);
  let changedElsewhere = 0;
  for (let i = 0; i < original.length; i++) {
    if (!touched(i) && original[i] !== weights[i]) changedElsewhere++;
  }
  strictEqual(changedElsewhere, 0);

  // The default route patches a copy beside the model instead: the same bytes, on disk, and
  // the copy is gone after dispose. A scratch folder left by a process that is gone is swept.
  const stale = join(dirname(unetPath), ".lora-merge-999999999-left");
  await Deno.mkdir(stale, { recursive: true });
  const beside = await patchModel(unetPath, "unet", [{ path, weight, modules }]);
  ok(beside?.file);
  deepStrictEqual(beside.externalData, []);
  strictEqual(dirname(dirname(beside.file)), dirname(unetPath));
  deepStrictEqual(await Deno.readFile(join(dirname(beside.file), "weights.pb")), weights);
  deepStrictEqual(await Deno.readFile(beside.file), await Deno.readFile(unetPath));
  await Deno.stat(stale).then(() => fail("the stale scratch folder is still there"), () => {});
  await beside.dispose();
  await Deno.stat(dirname(beside.file)).then(() => fail("the copy is still there"), () => {});
});

const unetFeeds = (): Feeds => ({
  sample: new Tensor("float32", values(2 * 4 * 8 * 8, 5), [2, 4, 8, 8]),
  timestep: new Tensor("float32", Float32Array.of(500, 500), [2]),
  encoder_hidden_states: new Tensor("float32", values(2 * 77 * 32, 6), [2, 77, 32]),
});
const teFeeds = (): Feeds => ({
  input_ids: new Tensor(
    "int32",
    Int32Array.from({ length: 77 }, (_, i) => (i * 37 + 49406) % 49408),
    [1, 77],
  ),
});

async function outputOf(session: Session, feeds: Feeds, name: string): Promise<Float32Array> {
  try {
    return Float32Array.from((await session.run(feeds))[name].data as Float32Array);
  } finally {
    await session.release();
  }
}

Deno.test("LoraSet.open: weight 1 changes the UNet and text encoder outputs, weight 0 changes nothing", async () => {
  const path = await writeLora("tiny.safetensors", buildTinyLora(7));
  const plainUnet = await outputOf(
    await createSession(unetPath, SESSION),
    unetFeeds(),
    "out_sample",
  );
  const plainTe = await outputOf(
    await createSession(tePath, SESSION),
    teFeeds(),
    "last_hidden_state",
  );

  const on = await LoraSet.load([{ path, weight: 1 }]);
  const loraUnet = await outputOf(
    await on.open(unetPath, "unet", SESSION),
    unetFeeds(),
    "out_sample",
  );
  const loraTe = await outputOf(
    await on.open(tePath, "text_encoder", SESSION),
    teFeeds(),
    "last_hidden_state",
  );
  on.assertMatched();
  notDeepStrictEqual(loraUnet, plainUnet, "a LoRA with weight 1 changes the UNet output");
  notDeepStrictEqual(loraTe, plainTe, "a text-encoder LoRA changes the embeddings");

  const off = await LoraSet.load([{ path, weight: 0 }]);
  deepStrictEqual(
    await outputOf(await off.open(unetPath, "unet", SESSION), unetFeeds(), "out_sample"),
    plainUnet,
  );
  deepStrictEqual(
    await outputOf(await off.open(tePath, "text_encoder", SESSION), teFeeds(), "last_hidden_state"),
    plainTe,
  );

  // A UNet-only LoRA leaves the text encoder as it is (opened from its path).
  const unetOnly = await LoraSet.load([
    {
      path: await writeLora("unet_only.safetensors", buildTinyLora(7, { targets: "unet" })),
      weight: 1,
    },
  ]);
  deepStrictEqual(
    await outputOf(
      await unetOnly.open(tePath, "text_encoder", SESSION),
      teFeeds(),
      "last_hidden_state",
    ),
    plainTe,
  );
});

Deno.test("engine: a LoRA with weight 0 gives the same pixels as none; weight 1 other pixels", async () => {
  const path = await writeLora("engine.safetensors", buildTinyLora(11, { rank: 4, alpha: 4 }));
  const request = {
    mode: "text_to_image",
    positive: "a red apple",
    negative: "",
    width: 64,
    height: 64,
    seed: 3,
  } as GenerationRequest;
  const render = async (weight?: number) => {
    const config = tinyConfig(root);
    if (weight !== undefined) config.lora = { files: [{ path, weight }] };
    const engine = await createEngine(config);
    try {
      return (await engine.generate(request)).image;
    } finally {
      await engine.release();
    }
  };
  const none = await render();
  deepStrictEqual((await render(0)).data, none.data);
  ok(differingBytes(await render(1), none) > 100, "weight 1 changes the image");
});

Deno.test("start-up: bad, unreadable and non-matching LoRA files fail naming the file", async () => {
  const attempt = (path: string) => {
    const config = tinyConfig(root);
    config.lora = { files: [{ path, weight: 1 }] };
    return loadModels(config);
  };
  const missing = join(loraDir, "missing.safetensors");
  await rejects(attempt(missing), (e: Error) => e.message.includes(`LoRA ${missing}: cannot read`));
  const bad = await writeLora(
    "bad.safetensors",
    new TextEncoder().encode("not safetensors at all"),
  );
  await rejects(
    attempt(bad),
    (e: Error) => e.message.includes(`LoRA ${bad}: not a valid safetensors file`),
  );
  const none = await writeLora(
    "none.safetensors",
    encodeSafetensors([
      {
        name: "lora_unet_no_such_block.lora_down.weight",
        dtype: "F16",
        shape: [1, 4],
        data: values(4, 1),
      },
      {
        name: "lora_unet_no_such_block.lora_up.weight",
        dtype: "F16",
        shape: [4, 1],
        data: values(4, 2),
      },
    ]),
  );
  await rejects(
    attempt(none),
    (e: Error) =>
      e.message.includes(`LoRA ${none}: none of its 1 modules`) &&
      /lora_unet_no_such_block/.test(e.message),
  );
  // A partial match (one unknown module) loads.
  const partial = await writeLora("partial.safetensors", buildTinyLora(5, { unmatched: true }));
  await releaseModels(await attempt(partial));
  // A LoRA for another base model (wrong widths) names the key and the shapes.
  const wide = await writeLora(
    "wide.safetensors",
    encodeSafetensors([
      {
        name: "lora_unet_conv_in.lora_down.weight",
        dtype: "F32",
        shape: [1, 4, 3, 3],
        data: values(36, 1),
      },
      {
        name: "lora_unet_conv_in.lora_up.weight",
        dtype: "F32",
        shape: [320, 1, 1, 1],
        data: values(320, 2),
      },
    ]),
  );
  await rejects(
    attempt(wide),
    /key "lora_unet_conv_in" → node "\/conv_in\/Conv": LoRA update is \[320, 36\]/,
  );
});

Deno.test("start-up: a LoRA must be in models.lock (component lora) and verified", async () => {
  const path = await writeLora("locked.safetensors", buildTinyLora(9));
  const lockPath = join(dirname(root), "models.lock");
  const entries = parseLock(await Deno.readTextFile(lockPath));
  const config = {
    models: {
      root,
      base: join(root, "sd15"),
      controlnetUnet: join(root, "sd15", "controlnet_unet", "model.onnx"),
      vaeDecoder: "full" as const,
      tinyVaeDecoder: join(root, "taesd", "vae_decoder", "model.onnx"),
      lock: lockPath,
    },
    controlnet: tinyConfig(root).controlnet,
    lora: { files: [{ path, weight: 1 }] },
  };
  await rejects(
    verifyConfiguredModels(config),
    (e: Error) =>
      e.message.includes(
        `lora/locked.safetensors ([lora] files = "lora/locked.safetensors"): not in ${lockPath}`,
      ),
  );
  const tmp = await Deno.makeTempDir({ prefix: "lora_lock_" });
  try {
    const withLora = join(tmp, "models.lock");
    const bytes = await Deno.readFile(path);
    await Deno.writeTextFile(
      withLora,
      lockText([...entries, lockEntry("lora", "lora/locked.safetensors", bytes)]),
    );
    await verifyConfiguredModels({ ...config, models: { ...config.models, lock: withLora } });
    // Locked with other bytes: the verification refuses it.
    const other = new Uint8Array(bytes);
    other[other.length - 1] ^= 1;
    await Deno.writeTextFile(
      withLora,
      lockText([...entries, lockEntry("lora", "lora/locked.safetensors", other)]),
    );
    await rejects(
      verifyConfiguredModels({ ...config, models: { ...config.models, lock: withLora } }),
      /locked\.safetensors/,
    );
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("fixture names: the tiny text encoder carries its torch scope", async () => {
  const model = onnx.onnx.ModelProto.decode(await Deno.readFile(tePath));
  ok(model.graph!.node!.some((n) => n.name === `/${TEXT_ENCODER_SCOPES.mix}/MatMul`));
});

const noTmpfs = await tmpfsUnavailable();

Deno.test({
  ...ignoredFor(
    noTmpfs,
    "patchModel: a model folder with no room for the copy is patched in memory instead",
  ),
  async fn() {
    const path = await writeLora("full-disk.safetensors", buildTinyLora(12, { targets: "unet" }));
    const { modules } = kohyaModules(parseSafetensors(await Deno.readFile(path), path), path);
    const loras = [{ path, weight: 1, modules }];
    const expected = await patchModel(unetPath, "unet", loras, { scratch: "memory" });
    const mountPoint = await Deno.makeTempDir({ prefix: "lora-full-" });
    const mount = await new Deno.Command("mount", {
      args: ["-t", "tmpfs", "-o", "size=1m", "tmpfs", mountPoint],
    }).output();
    ok(mount.success, new TextDecoder().decode(mount.stderr));
    try {
      // The UNet on a file system that holds it, with less room left than its weights.pb.
      for (const f of ["model.onnx", "weights.pb"]) {
        await Deno.copyFile(join(dirname(unetPath), f), join(mountPoint, f));
      }
      await fill(join(mountPoint, "filler"));
      const freed = (await Deno.stat(join(dirname(unetPath), "weights.pb"))).size / 2;
      await Deno.truncate(
        join(mountPoint, "filler"),
        (await Deno.stat(join(mountPoint, "filler"))).size - freed,
      );
      const patched = await patchModel(join(mountPoint, "model.onnx"), "unet", loras);
      ok(patched && expected);
      strictEqual(patched.file, undefined, "no copy: it did not fit");
      deepStrictEqual(patched.externalData.map((f) => f.path), ["weights.pb"]);
      deepStrictEqual(patched.externalData[0].data, expected.externalData[0].data);
      // The half-written scratch folder is gone.
      const left = [];
      for await (const e of Deno.readDir(mountPoint)) left.push(e.name);
      deepStrictEqual(left.sort(), ["filler", "model.onnx", "weights.pb"]);
    } finally {
      await new Deno.Command("umount", { args: [mountPoint] }).output();
      await Deno.remove(mountPoint, { recursive: true });
    }
  },
});
