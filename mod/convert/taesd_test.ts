/**
 * The TAESD converter on a random-weight `taesd_decoder.safetensors` with the
 * real key names and shapes: run in ONNX Runtime and held against an
 * independent float64 reading of madebyollin/taesd `taesd.py`
 * (`taesd_testing.ts`), checked against the engine's tiny-decoder contract,
 * and deterministic to the byte.
 */
import { deepStrictEqual, ok, strictEqual, throws } from "node:assert";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { encodeSafetensors, type SafetensorsEntry } from "../../tests/fixtures/builder/lora.ts";
import { checkComponentFile } from "../models/mod.ts";
import { checkSession, createSessionFromBytes, floatTensor, toFloat32 } from "../onnx/mod.ts";
import { recordingOpener, tinyConfig, tinyModels } from "../pipeline/_testing.ts";
import { createEngine } from "../pipeline/mod.ts";
import { SafetensorsError } from "../lora/mod.ts";
import { TAESD_CONVERTER_VERSION, TaesdConversionError, taesdDecoderToOnnx } from "./mod.ts";
import {
  randomTaesdWeights,
  referenceDecode,
  referenceTensorShapes,
  taesdSafetensors,
  type TaesdWeights,
} from "./taesd_testing.ts";

const weights = randomTaesdWeights(7);
const file = taesdSafetensors(weights);
const converted = taesdDecoderToOnnx(file);

/** A latent `[4, h, w]` reaching ±4, so TAESD's tanh clamp bends it. */
function latent(h: number, w: number, phase: number): Float32Array {
  return Float32Array.from({ length: 4 * h * w }, (_, i) => 4 * Math.sin(i * 1.3 + phase));
}

function maxAbs(values: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < values.length; i++) m = Math.max(m, Math.abs(values[i]));
  return m;
}

function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  strictEqual(a.length, b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

/** Runs `model` on latents `[n, 4, h, w]` with the engine's graph optimisation ("all"). */
async function decode(
  model: Uint8Array,
  z: Float32Array,
  dims: number[],
): Promise<Float32Array> {
  const s = await createSessionFromBytes(model, [], { intraOpThreads: 1 });
  try {
    const out = await s.run({ latent_sample: floatTensor("float32", z, dims) });
    deepStrictEqual(out.sample.dims, [dims[0], 3, dims[2] * 8, dims[3] * 8]);
    return toFloat32(out.sample);
  } finally {
    await s.release();
  }
}

Deno.test("TAESD layout: the key names and shapes, written as the safetensors library writes them, are the published file's exact 4,895,612 bytes", () => {
  const shapes = referenceTensorShapes();
  strictEqual(shapes.length, 67);
  // madebyollin/taesd README: the decoder has 1,222,531 parameters.
  strictEqual(shapes.reduce((n, t) => n + t.shape.reduce((a, b) => a * b, 1), 0), 1_222_531);
  // The pinned taesd_decoder.safetensors (TAESD 1.2, Git LFS pointer size): 8-byte length, a
  // JSON header of these names, shapes and F32 offsets padded to 8, then 4 × 1,222,531 bytes.
  strictEqual(file.length, 4_895_612);
});

Deno.test("taesdDecoderToOnnx: ONNX Runtime equals a float64 reference of taesd.py's Decoder (+ DecoderTiny's x·2 − 1), batch of 2", async () => {
  const [h, w] = [5, 7]; // not square, so a swapped height and width would show
  const z0 = latent(h, w, 0.2);
  const z1 = latent(h, w, 1.9);
  const both = new Float32Array(2 * z0.length);
  both.set(z0);
  both.set(z1, z0.length);
  const out = await decode(converted, both, [2, 4, h, w]);
  const size = 3 * 8 * h * 8 * w;
  const ref = referenceDecode(weights, z0, h, w);
  // float32 rounding (unit 6e-8) through 35 convolutions of up to 576-term dot products keeps
  // ONNX Runtime (and torch's own float32) within a few 1e-6 of exact maths on these unit-scale
  // outputs (measured: 4e-6 on x86-64; torch 1.13 fp32 vs fp64 on the same weights: 5e-6). The bound,
  // 2e-5 of the largest output, leaves that margin and is 1e4× below what any wrong layer,
  // weight or scaling gives (order 1, see the swapped-weights check below).
  const tolerance = 2e-5 * maxAbs(ref);
  ok(maxAbs(ref) > 1 && maxAbs(ref) < 50, `unit-scale output, got max |x| = ${maxAbs(ref)}`);
  const err = maxAbsDiff(out.subarray(0, size), ref);
  ok(err <= tolerance, `max |ORT − reference| = ${err} > ${tolerance}`);
  // The second batch item is its own image, equal to decoding it alone.
  const alone = await decode(converted, z1, [1, 4, h, w]);
  ok(maxAbsDiff(out.subarray(size), alone) <= tolerance, "batch item 2 = its own decode");
  ok(maxAbsDiff(out.subarray(size), out.subarray(0, size)) > 0.1, "two latents, two images");

  // The comparison can fail: two blocks' first convs swapped in the file is a valid TAESD file,
  // but not this network's maths.
  const swapped: TaesdWeights = new Map(weights);
  swapped.set("4.conv.0.weight", weights.get("9.conv.0.weight")!);
  swapped.set("9.conv.0.weight", weights.get("4.conv.0.weight")!);
  const wrong = await decode(taesdDecoderToOnnx(taesdSafetensors(swapped)), z0, [1, 4, h, w]);
  ok(maxAbsDiff(wrong, ref) > 1e3 * tolerance, "a mis-wired weight is far outside the tolerance");
});

Deno.test("taesdDecoderToOnnx: the output passes the tiny-decoder contract and the engine paints what the reference decodes", async () => {
  const s = await createSessionFromBytes(converted, [], { intraOpThreads: 1 });
  try {
    const io = checkSession("vae_decoder", s);
    deepStrictEqual(s.inputs.map((i) => [i.name, i.dtype, i.shape]), [
      ["latent_sample", "float32", ["batch_size", 4, "latent_height", "latent_width"]],
    ]);
    deepStrictEqual(s.outputs.map((o) => [o.name, o.dtype, o.shape]), [
      ["sample", "float32", ["batch_size", 3, "height", "width"]],
    ]);
    strictEqual(io.latentChannels, 4);
  } finally {
    await s.release();
  }
  const root = await tinyModels("taesd_convert");
  const path = join(root, "taesd-converted", "vae_decoder", "model.onnx");
  await Deno.mkdir(join(root, "taesd-converted", "vae_decoder"), { recursive: true });
  await Deno.writeFile(path, converted);
  // What `deno task models add --component tiny_vae_decoder` checks before locking a file.
  deepStrictEqual(await checkComponentFile(path, "tiny_vae_decoder"), {
    files: [{ path: "model.onnx", component: "vae_decoder" }],
    problems: [],
    ignored: [],
  });
  const rec = recordingOpener();
  const base = tinyConfig(root);
  const engine = await createEngine(
    { ...base, models: { ...base.models, vaeDecoder: "tiny", tinyVaeDecoder: path } },
    { openSession: rec.open },
  );
  try {
    const { image } = await engine.generate({
      mode: "text_to_image",
      positive: "a lighthouse",
      negative: "",
      width: 64,
      height: 48,
      seed: 3,
    });
    deepStrictEqual([image.width, image.height], [64, 48]);
    const fed = rec.runs.filter((r) => r.label === "vae_decoder").at(-1)!.feeds.latent_sample;
    deepStrictEqual(fed.dims, [1, 4, 6, 8]);
    // The picture is TAESD's decode of those latents, x/2 + 0.5 in [0, 1], to one grey level.
    const ref = referenceDecode(weights, fed.data!, 6, 8);
    const plane = 48 * 64;
    let worst = 0;
    for (let i = 0; i < plane; i++) {
      for (let c = 0; c < 3; c++) {
        const v = Math.round(Math.min(1, Math.max(0, ref[c * plane + i] / 2 + 0.5)) * 255);
        worst = Math.max(worst, Math.abs(v - image.data[i * 3 + c]));
      }
    }
    ok(worst <= 1, `largest pixel difference ${worst}`);
    ok(new Set(image.data).size > 50, "a picture, not a flat fill");
  } finally {
    await engine.release();
  }
});

Deno.test("taesdDecoderToOnnx: deterministic to the byte, whatever buffer the input sits in", () => {
  deepStrictEqual(taesdDecoderToOnnx(file), converted);
  const padded = new Uint8Array(file.length + 13);
  padded.set(file, 5);
  deepStrictEqual(taesdDecoderToOnnx(padded.subarray(5, 5 + file.length), "other name"), converted);
  // The output of this version for these weights. A change here changes what users' machines
  // derive from the pinned download: bump TAESD_CONVERTER_VERSION with it, so a digest recorded
  // for one version is never taken for another's.
  const digests: Record<number, string> = {
    1: "8b4ce6c090c20d9efb5fb203ef47373fd3e4356361956041383ac34a0bc53add",
  };
  strictEqual(
    createHash("sha256").update(converted).digest("hex"),
    digests[TAESD_CONVERTER_VERSION],
    `converter version ${TAESD_CONVERTER_VERSION}: output digest`,
  );
});

/** The file with some tensors replaced, added, or dropped (`null`). */
function edited(changes: Record<string, Omit<SafetensorsEntry, "name"> | null>): Uint8Array {
  const shapes = new Map(referenceTensorShapes().map((t) => [t.name, t.shape]));
  const names = new Set([...weights.keys(), ...Object.keys(changes)]);
  const entries: SafetensorsEntry[] = [];
  for (const name of [...names].sort()) {
    const change = changes[name];
    if (change === null) continue;
    entries.push(
      change
        ? { name, ...change }
        : { name, dtype: "F32", shape: shapes.get(name)!, data: weights.get(name)! },
    );
  }
  return encodeSafetensors(entries);
}

Deno.test("taesdDecoderToOnnx: a file that is not TAESD's decoder is refused with what is wrong", () => {
  const refuse = (
    bytes: Uint8Array,
    re: RegExp,
    type: new (message: string) => Error = TaesdConversionError,
  ) =>
    throws(
      () => taesdDecoderToOnnx(bytes, "models/taesd/taesd_decoder.safetensors"),
      (e: Error) => {
        ok(e instanceof type, `${e.name}: ${e.message}`);
        ok(e.message.startsWith("models/taesd/taesd_decoder.safetensors: "), e.message);
        ok(re.test(e.message), e.message);
        return true;
      },
    );
  const w = (name: string) => weights.get(name)!;
  refuse(
    edited({ "12.weight": null }),
    /not TAESD's decoder \(madebyollin\/taesd `taesd\.py` Decoder: 67 F32 tensors, 64 channels\): missing tensors 12\.weight$/,
  );
  refuse(
    edited({ "12.bias": { dtype: "F32", shape: [64], data: new Float32Array(64) } }),
    /unexpected tensors 12\.bias$/,
  );
  refuse(
    edited({ "3.conv.2.weight": { dtype: "F32", shape: [64, 64, 9], data: w("3.conv.2.weight") } }),
    /tensor "3\.conv\.2\.weight" has shape \[64,64,9\], expected \[64,64,3,3\]$/,
  );
  refuse(
    edited({ "19.bias": { dtype: "F16", shape: [3], data: w("19.bias") } }),
    /tensor "19\.bias" is F16, expected F32$/,
  );
  const nan = Float32Array.from(w("1.bias"));
  nan[17] = NaN;
  refuse(
    edited({ "1.bias": { dtype: "F32", shape: [64], data: nan } }),
    /"1\.bias" holds NaN at index 17/,
  );
  // Several problems are reported together.
  refuse(
    edited({
      "7.weight": null,
      "19.weight": { dtype: "F32", shape: [4, 64, 3, 3], data: new Float32Array(2304) },
    }),
    /: missing tensors 7\.weight; tensor "19\.weight" has shape \[4,64,3,3\], expected \[3,64,3,3\]$/,
  );
  // The usual mix-ups are named.
  refuse(
    encodeSafetensors([{
      name: "0.weight",
      dtype: "F32",
      shape: [64, 3, 3, 3],
      data: new Float32Array(1728),
    }]),
    /missing tensors 1\.weight, 1\.bias, 3\.conv\.0\.weight, 3\.conv\.0\.bias, 3\.conv\.2\.weight and 62 more; unexpected tensors 0\.weight \(this looks like TAESD's encoder/,
  );
  refuse(
    encodeSafetensors([
      { name: "decoder.layers.0.weight", dtype: "F32", shape: [64, 4, 3, 3], data: w("1.weight") },
    ]),
    /diffusers' AutoencoderTiny `diffusion_pytorch_model\.safetensors`/,
  );
  // A truncated download is not a safetensors file at all (the shared reader says why).
  refuse(
    file.subarray(0, file.length - 100),
    /not a valid safetensors file: tensor "[^"]+" has data_offsets/,
    SafetensorsError,
  );
});
