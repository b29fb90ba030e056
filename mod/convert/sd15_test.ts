import { deepStrictEqual, ok, rejects, strictEqual } from "node:assert";
import { join } from "node:path";
import {
  createSession,
  createSessionFromBytes,
  exposeLatentParameters,
  floatTensor,
  type Session,
  Tensor,
  toFloat32,
} from "../onnx/mod.ts";
import { inferTextEncoderConfig, inferUnetConfig, inferVaeConfig, OPSET } from "../graph/mod.ts";
import type { Sd15Model, WeightEntry } from "../graph/mod.ts";
import { convertSd15, type Sd15Component, Sd15ConversionError } from "./sd15.ts";
import {
  randomTestModels,
  randomTestWeights,
  TEST_TEXT_ENCODER,
  TEST_UNET,
  TEST_VAE,
} from "./sd15_testing.ts";

const SEED = 77;

/** Deterministic values in [-1, 1). */
function wave(n: number, phase: number): Float32Array {
  return Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37 + phase));
}

/** The 13 residual shapes of the test UNet at an 8×8 latent. */
const RESIDUAL_CHANNELS = [32, 32, 32, 32, 64, 64, 64, 64, 64, 64, 64, 64, 64];
const RESIDUAL_LEVEL = [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3];

/** Feeds of each component (float values; cast to `dtype` on the way in). */
function feeds(component: Sd15Component, dtype: "float32" | "float16"): Record<string, Tensor> {
  const f = (data: Float32Array, dims: number[]) => floatTensor(dtype, data, dims);
  switch (component) {
    case "text_encoder": {
      const ids = new Int32Array(77).fill(49407);
      ids.set([49406, 320, 1929, 530, 518, 3240, 49407]);
      return { input_ids: new Tensor("int32", ids, [1, 77]) };
    }
    case "unet":
    case "controlnet_unet": {
      const out: Record<string, Tensor> = {
        sample: f(wave(4 * 64, 0), [1, 4, 8, 8]),
        timestep: f(Float32Array.of(521), [1]),
        encoder_hidden_states: f(wave(77 * 32, 1), [1, 77, 32]),
      };
      if (component === "controlnet_unet") {
        RESIDUAL_CHANNELS.forEach((c, i) => {
          const s = 8 >> RESIDUAL_LEVEL[i];
          const name = i === 12
            ? "mid_block_additional_residual"
            : `down_block_${i}_additional_residual`;
          out[name] = f(wave(c * s * s, i + 2), [1, c, s, s]);
        });
      }
      return out;
    }
    case "vae_decoder":
      return { latent_sample: f(wave(4 * 64, 3), [1, 4, 8, 8]) };
    case "vae_encoder":
      return { sample: f(wave(3 * 64 * 64, 4), [1, 3, 64, 64]) };
  }
}

/** Opens a written model; a VAE encoder with its latent's parameters exposed (no random draw). */
async function open(dir: string, component: Sd15Component): Promise<Session> {
  const path = join(dir, component, "model.onnx");
  if (component !== "vae_encoder") return await createSession(path, { intraOpThreads: 1 });
  const rewritten = exposeLatentParameters(await Deno.readFile(path));
  if (rewritten.kind !== "rewritten") throw new Error(`encoder not rewritten: ${rewritten.kind}`);
  return await createSessionFromBytes(rewritten.model, [], { intraOpThreads: 1 });
}

/** Every output of a model on the component's feeds, as float32. */
async function outputs(
  dir: string,
  component: Sd15Component,
  dtype: "float32" | "float16",
): Promise<Record<string, Float32Array>> {
  const s = await open(dir, component);
  try {
    const out = await s.run(feeds(component, dtype));
    return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, toFloat32(v)]));
  } finally {
    await s.release();
  }
}

/** Writes the builder's random stand-in of `component` as the converter lays it out. */
async function writeReference(
  dir: string,
  component: Sd15Component,
  model: Sd15Model,
  fp16: boolean,
): Promise<void> {
  await Deno.mkdir(join(dir, component), { recursive: true });
  const unet = component === "unet" || component === "controlnet_unet";
  await model.graph.writeModel(join(dir, component, "model.onnx"), {
    opset: OPSET,
    externalData: unet ? { location: "weights.pb", minBytes: 1024 } : undefined,
    float16: fp16,
  });
}

const ALL: Sd15Component[] = [
  "text_encoder",
  "unet",
  "controlnet_unet",
  "vae_decoder",
  "vae_encoder",
];

Deno.test("test-sized weights give their architecture back from the shapes alone", () => {
  const w = randomTestWeights(SEED);
  deepStrictEqual(inferUnetConfig(w.unet), TEST_UNET);
  deepStrictEqual(inferTextEncoderConfig(w.textEncoder), TEST_TEXT_ENCODER);
  deepStrictEqual(inferVaeConfig(w.vae), TEST_VAE);
});

for (const precision of ["fp32", "fp16"] as const) {
  Deno.test(`convertSd15 ${precision}: every model computes what the builder's stand-in on the same weights computes`, async () => {
    const tmp = await Deno.makeTempDir({ prefix: "sd15_convert_" });
    try {
      const out = join(tmp, "set");
      const progress: string[] = [];
      const result = await convertSd15(randomTestWeights(SEED), {
        outDir: out,
        precision,
        components: ALL,
        onProgress: (p) => {
          if (p.done === p.total) progress.push(p.component);
        },
      });
      deepStrictEqual(progress, ALL, "each model reported to its last tensor");
      // The layout of the diffusers script's export, as the pinned sets have it.
      deepStrictEqual(result.files.map((f) => f.path), [
        "text_encoder/model.onnx",
        "unet/model.onnx",
        "unet/weights.pb",
        "controlnet_unet/model.onnx",
        "controlnet_unet/weights.pb",
        "vae_decoder/model.onnx",
        "vae_encoder/model.onnx",
        "tokenizer/vocab.json",
        "tokenizer/merges.txt",
        "scheduler/scheduler_config.json",
      ]);
      for (const f of result.files) strictEqual((await Deno.stat(join(out, f.path))).size, f.size);
      deepStrictEqual(result.unused, {
        unet: [],
        textEncoder: ["text_model.embeddings.position_ids"],
        vae: [],
      });
      deepStrictEqual(result.architecture.unet, TEST_UNET);
      // The scratch folder is gone: only the set is left.
      deepStrictEqual([...Deno.readDirSync(tmp)].map((e) => e.name), ["set"]);

      const ref = join(tmp, "reference");
      const models = randomTestModels(SEED);
      const byComponent: Record<Sd15Component, Sd15Model> = {
        text_encoder: models.textEncoder,
        unet: models.unet,
        controlnet_unet: models.controlnetUnet,
        vae_decoder: models.vaeDecoder,
        vae_encoder: models.vaeEncoder,
      };
      const dtype = precision === "fp16" ? "float16" : "float32";
      for (const c of ALL) {
        await writeReference(ref, c, byComponent[c], precision === "fp16");
        strictEqual(result.params[c], byComponent[c].params, `${c}: parameters`);
        const want = await outputs(ref, c, dtype);
        const got = await outputs(out, c, dtype);
        deepStrictEqual(Object.keys(got).sort(), Object.keys(want).sort());
        for (const [name, values] of Object.entries(want)) {
          ok(values.some((v) => v !== 0) && values.every(Number.isFinite), `${c}.${name} computes`);
          deepStrictEqual(got[name], values, `${c}.${name}: the converted model's output`);
        }
      }
      // The same weights, bit for bit: the UNets' external data files are equal.
      const refUnet = await Deno.readFile(join(ref, "unet", "weights.pb"));
      ok(refUnet.byteLength > 0);
      deepStrictEqual(await Deno.readFile(join(out, "unet", "weights.pb")), refUnet);
    } finally {
      await Deno.remove(tmp, { recursive: true });
    }
  });
}

Deno.test("convertSd15: missing or mis-shaped weights are named and nothing is written", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "sd15_convert_" });
  try {
    const w = randomTestWeights(SEED);
    const unet = new Map(w.unet);
    unet.delete("mid_block.attentions.0.transformer_blocks.0.attn2.to_v.weight");
    const bad = unet.get("up_blocks.1.resnets.0.conv2.weight")!;
    unet.set("up_blocks.1.resnets.0.conv2.weight", { ...bad, shape: [64, 64, 1, 1] });
    await rejects(
      convertSd15({ unet, vae: w.vae }, { outDir: join(tmp, "set") }),
      (e: Error) =>
        e instanceof Sd15ConversionError &&
        e.message.includes(
          "mid_block.attentions.0.transformer_blocks.0.attn2.to_v.weight: missing",
        ) &&
        e.message.includes(
          "up_blocks.1.resnets.0.conv2.weight: shape [64, 64, 1, 1], expected [64, 64, 3, 3]",
        ),
    );
    await rejects(
      convertSd15({ vae: w.vae }, { outDir: join(tmp, "set"), components: ["unet"] }),
      (e: Error) => e instanceof Sd15ConversionError && e.message.includes("no UNet weights"),
    );
    // An SD 2.x-like text width against an SD 1.x UNet.
    const text = new Map<string, WeightEntry>(w.textEncoder);
    const tok = text.get("text_model.embeddings.token_embedding.weight")!;
    text.set("text_model.embeddings.token_embedding.weight", { ...tok, shape: [49408, 64] });
    await rejects(
      convertSd15({ unet: w.unet, textEncoder: text }, { outDir: join(tmp, "set") }),
      (e: Error) => e instanceof Sd15ConversionError && /32-wide text states/.test(e.message),
    );
    await Deno.mkdir(join(tmp, "full"));
    await Deno.writeTextFile(join(tmp, "full", "x"), "x");
    await rejects(
      convertSd15({ vae: w.vae }, { outDir: join(tmp, "full") }),
      (e: Error) => e instanceof Sd15ConversionError && /not empty/.test(e.message),
    );
    deepStrictEqual([...Deno.readDirSync(tmp)].map((e) => e.name), ["full"], "nothing written");
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("convertSd15: an abort mid-conversion (or a failing read) leaves nothing behind", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "sd15_convert_" });
  try {
    const w = randomTestWeights(SEED);
    const controller = new AbortController();
    await rejects(
      convertSd15(w, {
        outDir: join(tmp, "set"),
        onProgress: (p) => {
          if (p.component === "unet" && p.done === 40) controller.abort(new Error("stop"));
        },
        signal: controller.signal,
      }),
      (e: Error) => e.message === "stop",
    );
    deepStrictEqual([...Deno.readDirSync(tmp)], [], "no set, no scratch folder");
    // A tensor that cannot be read half-way through the UNet: the same.
    const unet = new Map(w.unet);
    const entry = unet.get("up_blocks.2.resnets.1.conv1.weight")!;
    unet.set("up_blocks.2.resnets.1.conv1.weight", {
      ...entry,
      read: () => Promise.reject(new Error("read failed: truncated file")),
    });
    // A scratch folder a killed conversion left (its process is gone) is swept on the way.
    await Deno.mkdir(join(tmp, ".set.converting-999999999-0000abcd", "unet"), { recursive: true });
    await rejects(
      convertSd15({ ...w, unet }, { outDir: join(tmp, "set") }),
      /truncated file/,
    );
    deepStrictEqual([...Deno.readDirSync(tmp)], []);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});
