import { deepStrictEqual, notDeepStrictEqual, ok, strictEqual, throws } from "node:assert";
import onnx from "onnx-proto";
import { Graph } from "../graph/mod.ts";
import {
  buildVaeEncoder,
  type ExportOptions,
  LOGVAR_BIAS,
  TINY_DIMS,
} from "../../tests/fixtures/builder/mod.ts";
import { checkSession } from "./contract.ts";
import { createSessionFromBytes, type Session } from "./runtime.ts";
import { floatTensor, toFloat32 } from "./tensors.ts";
import { exposeLatentParameters, VaeEncoderGraphError } from "./vae_encoder_graph.ts";

const SEED = 77;
const SIZE = 256; // latent 32×32: 4096 samples of the in-graph noise
const N = 4 * (SIZE / 8) ** 2;

/** The real exports' encoders, as tests/fixtures/builder builds them (same weights for one seed). */
const FLAVOURS: Array<{ name: string; options: ExportOptions; rewritten?: string }> = [
  {
    name: "diffusers script (latent_sample, two-Slice chunk, noise Cast)",
    options: { flavour: "diffusers", io: "float32" },
    rewritten: "Slice",
  },
  {
    name: "diffusers script --fp16 (fp16 I/O)",
    options: { flavour: "diffusers", io: "float16" },
    rewritten: "Slice",
  },
  {
    name: "Optimum ≤ 1.22 (latent_sample, Split chunk)",
    options: { flavour: "optimum", io: "float32", vaeEncoder: "latent_sample" },
    rewritten: "Split",
  },
  { name: "Optimum ≥ 1.23 (latent_parameters)", options: { flavour: "optimum", io: "float32" } },
];

function picture(): Float32Array {
  const x = new Float32Array(3 * SIZE * SIZE);
  for (let i = 0; i < x.length; i++) x[i] = Math.sin(i * 0.013) * 0.9;
  return x;
}

async function run(session: Session, name: string): Promise<Float32Array> {
  const input = session.inputs[0];
  const out = await session.run({
    [input.name]: floatTensor(input.dtype, picture(), [1, 3, SIZE, SIZE]),
  }, [name]);
  return toFloat32(out[name]);
}

function ops(bytes: Uint8Array): string[] {
  return (onnx.onnx.ModelProto.decode(bytes).graph?.node ?? []).map((n) => n.opType ?? "");
}

for (const f of FLAVOURS) {
  Deno.test(`exposeLatentParameters: ${f.name}`, async () => {
    const built = buildVaeEncoder(SEED, TINY_DIMS, f.options).model;
    const result = exposeLatentParameters(built);
    if (!f.rewritten) {
      strictEqual(result.kind, "parameters");
      return;
    }
    if (result.kind !== "rewritten") throw new Error(`expected a rewrite, got ${result.kind}`);
    strictEqual(result.random.op, "RandomNormalLike");
    strictEqual(result.chunk, f.rewritten);
    ok(!ops(result.model).some((op) => op.startsWith("Random")), "no random node is left");
    ok(!ops(result.model).includes("Exp"), "the sampling tail is gone");
    ok(result.removedNodes >= 8, `removed ${result.removedNodes} nodes`);

    // The same weights exported with Optimum ≥ 1.23's output: the reference parameters.
    const reference = buildVaeEncoder(SEED, TINY_DIMS, {
      ...f.options,
      vaeEncoder: "latent_parameters",
    }).model;
    const opts = { intraOpThreads: 1 };
    const [rewritten, direct, original] = await Promise.all([
      createSessionFromBytes(result.model, [], opts),
      createSessionFromBytes(reference, [], opts),
      createSessionFromBytes(built, [], opts),
    ]);
    try {
      // The loader's contract check sees what an Optimum ≥ 1.23 export shows.
      const io = checkSession("vae_encoder", rewritten);
      strictEqual(io.vaeEncoderOutput, "latent_parameters");
      strictEqual(io.latentChannels, 8);
      deepStrictEqual(rewritten.outputs[0].shape.length, 4);
      strictEqual(rewritten.outputs[0].shape[1], 8);
      strictEqual(rewritten.outputs[0].dtype, original.outputs[0].dtype);

      const params = await run(rewritten, "latent_parameters");
      deepStrictEqual(
        params,
        await run(direct, "latent_parameters"),
        "the parameters, bit for bit",
      );
      deepStrictEqual(params, await run(rewritten, "latent_parameters"), "deterministic");

      // What was removed was the sampler: the original output is mean + std·z, z ~ N(0, 1),
      // a new z on every run.
      const a = await run(original, "latent_sample");
      const b = await run(original, "latent_sample");
      notDeepStrictEqual(a, b, "the exported graph samples inside ONNX Runtime");
      const std = Math.exp(0.5 * LOGVAR_BIAS);
      let sum = 0, sq = 0;
      for (let i = 0; i < N; i++) {
        const logvar = params[N + i];
        ok(Math.abs(logvar - LOGVAR_BIAS) < 1, `logvar ${logvar}`);
        const z = (a[i] - params[i]) / Math.exp(0.5 * Math.min(Math.max(logvar, -30), 20));
        sum += z;
        sq += z * z;
      }
      const mean = sum / N;
      const variance = sq / N - mean * mean;
      ok(Math.abs(mean) < 0.1, `z mean ${mean} (std ≈ ${std.toFixed(3)})`);
      ok(Math.abs(variance - 1) < 0.15, `z variance ${variance}`);
    } finally {
      await Promise.all([rewritten.release(), direct.release(), original.release()]);
    }
  });
}

Deno.test("exposeLatentParameters: a latent_sample with no random node is left alone", () => {
  const g = new Graph("enc");
  g.input("sample", "float32", ["batch", 3, "h", "w"]);
  const pooled = g.op("AveragePool", ["sample"], {
    kernel_shape: { ints: [8, 8] },
    strides: { ints: [8, 8] },
  });
  const mean = g.op("Slice", [pooled, g.constI64([0]), g.constI64([1]), g.constI64([1])]);
  g.output(
    g.op("Concat", [mean, mean, mean, mean], { axis: { i: 1 } }),
    "latent_sample",
    "float32",
    [
      "batch",
      4,
      "h8",
      "w8",
    ],
  );
  strictEqual(exposeLatentParameters(g.encode({ opset: 17 }).model).kind, "deterministic");
});

/** A sampling tail over `params` whose shape a test bends. */
function tail(bend: "two randoms" | "noise reused" | "mean elsewhere" | "not added"): Uint8Array {
  const g = new Graph("enc");
  g.input("sample", "float32", ["batch", 8, "h", "w"]);
  const [mean, logvar] = g.opN("Split", ["sample", g.constI64([4, 4])], 2, { axis: { i: 1 } });
  const std = g.op("Exp", [g.op("Mul", [logvar, g.constF([0.5], [])])]);
  const noise = g.op("RandomNormalLike", [mean]);
  const scaled = g.op("Mul", [std, noise]);
  let out: string;
  switch (bend) {
    case "two randoms":
      out = g.op("Add", [g.op("Add", [mean, scaled]), g.op("RandomNormalLike", [mean])]);
      break;
    case "noise reused":
      out = g.op("Add", [g.op("Add", [mean, scaled]), noise]);
      break;
    case "mean elsewhere":
      out = g.op("Add", [g.op("Relu", ["sample"]), scaled]);
      break;
    case "not added":
      out = g.op("Sub", [mean, scaled]);
  }
  g.output(out, "latent_sample", "float32", ["batch", 4, "h", "w"]);
  return g.encode({ opset: 17 }).model;
}

Deno.test("exposeLatentParameters: a sampler it does not understand is an error that says why", () => {
  throws(() => exposeLatentParameters(tail("two randoms")), /expected one random node.*found 2/);
  throws(() => exposeLatentParameters(tail("noise reused")), /to be used once, but 2 nodes/);
  throws(
    () => exposeLatentParameters(tail("not added")),
    /added to the mean, but it goes to Sub node/,
  );
  throws(
    () => exposeLatentParameters(tail("mean elsewhere")),
    (e: Error) =>
      e instanceof VaeEncoderGraphError &&
      /by clamp\/scale\/exp, but found Relu node/.test(e.message),
  );
  const g = new Graph("other");
  g.input("sample", "float32", [1, 3, 8, 8]);
  g.output("sample", "image", "float32", [1, 3, 8, 8]);
  throws(
    () => exposeLatentParameters(g.encode({ opset: 17 }).model),
    /expected an output `latent_sample`/,
  );
});
