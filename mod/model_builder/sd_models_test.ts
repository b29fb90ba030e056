import { deepStrictEqual, ok, strictEqual, throws } from "node:assert";
import {
  checkSession,
  floatTensor,
  intTensor,
  type ResolvedIo,
  type Session,
  type Tensor,
  timestepTensor,
  toFloat32,
} from "../onnx/mod.ts";
import { Graph } from "../graph/graph.ts";
import { tinyModelFiles } from "./model_set.ts";
import { maxAbsDiff, openBuilt, wave } from "./testing.ts";

const files = tinyModelFiles();

// "a photo of a cat" with BOS/EOS, EOS-padded to 77 (CLIP ids, mod/tokenizer tests).
const PROMPT = [49406, 320, 1125, 539, 320, 2368, 49407];
const padded = (ids: number[]) => [...ids, ...new Array(77 - ids.length).fill(49407)];

async function withSession<T>(path: string, fn: (s: Session) => Promise<T>): Promise<T> {
  const s = await openBuilt(files, path);
  try {
    return await fn(s);
  } finally {
    await s.release();
  }
}

async function encodeText(path: string, rows: number[][]) {
  return await withSession(path, async (s) => {
    const io = checkSession("text_encoder", s);
    const ids = intTensor(io.inputs.input_ids.dtype, rows.flat(), [rows.length, rows[0].length]);
    const out = await s.run({ [io.inputs.input_ids.name]: ids });
    return {
      hidden: out.last_hidden_state,
      pooled: out.pooler_output,
      dtype: io.inputs.input_ids.dtype,
    };
  });
}

Deno.test("text encoder: int32/int64 ids, causal mixing, pooler at the EOS token", async () => {
  const a = padded(PROMPT);
  const b = padded([49406, 320, 1125, 539, 320, 1929, 49407]); // "a photo of a dog"
  const d = await encodeText("sd15/text_encoder/model.onnx", [a, b]);
  strictEqual(d.dtype, "int32");
  deepStrictEqual(d.hidden.dims, [2, 77, 32]);
  deepStrictEqual(d.pooled.dims, [2, 32]);
  const h = toFloat32(d.hidden);
  const row = (bi: number, pos: number) =>
    Array.from(h.subarray((bi * 77 + pos) * 32, (bi * 77 + pos + 1) * 32));

  // Causal: positions before the differing token (5) agree across the batch, later ones differ.
  for (let p = 0; p < 5; p++) deepStrictEqual(row(0, p), row(1, p));
  for (const p of [5, 6, 40]) ok(maxAbsDiff(row(0, p), row(1, p)) > 1e-4, `position ${p}`);

  // pooler_output = hidden state at argmax(input_ids): the first EOS, position 6.
  const eos = a.indexOf(Math.max(...a));
  strictEqual(eos, 6);
  deepStrictEqual(Array.from(toFloat32(d.pooled).subarray(0, 32)), row(0, eos));

  // Optimum flavour (int64 ids) has the same weights, so the same numbers.
  const o = await encodeText("sd15-optimum/text_encoder/model.onnx", [a, b]);
  strictEqual(o.dtype, "int64");
  strictEqual(maxAbsDiff(toFloat32(o.hidden), h), 0);

  // fp16 I/O: same weights, outputs rounded to half precision.
  const f = await encodeText("sd15-fp16/text_encoder/model.onnx", [a, b]);
  strictEqual(f.hidden.type, "float16");
  // fp16 outputs come back as Uint16Array bits, so they can be fed straight to another fp16 model.
  ok(f.hidden.data instanceof Uint16Array);
  ok(maxAbsDiff(toFloat32(f.hidden), h) < 1e-2);

  // Ids are taken modulo the 1024-row table; any sequence length up to 77 works.
  const short = await encodeText("sd15/text_encoder/model.onnx", [[5, 1029, 49407]]);
  deepStrictEqual(short.hidden.dims, [1, 3, 32]);
  const s = toFloat32(short.hidden);
  // Position 0 only sees token 0 (causal): id 1029 there equals id 5 (1029 mod 1024).
  const first = await encodeText("sd15/text_encoder/model.onnx", [[1029]]);
  deepStrictEqual(Array.from(toFloat32(first.hidden)), Array.from(s.subarray(0, 32)));
});

interface UnetFeeds {
  sample: Float32Array;
  t: number;
  ehs: Float32Array;
  tcond?: Float32Array;
}

/** Runs a UNet the way the pipeline would: dtypes and shapes from checkSession. */
async function runUnet(
  s: Session,
  io: ResolvedIo,
  f: UnetFeeds,
  dims: { b: number; h: number; w: number },
  extra: Record<string, Tensor> = {},
): Promise<Float32Array> {
  const feeds: Record<string, Tensor> = {
    [io.inputs.sample.name]: floatTensor(io.inputs.sample.dtype, f.sample, [
      dims.b,
      4,
      dims.h,
      dims.w,
    ]),
    [io.timestep!.name]: timestepTensor(io.timestep!, f.t, dims.b),
    [io.inputs.encoder_hidden_states.name]: floatTensor(
      io.inputs.encoder_hidden_states.dtype,
      f.ehs,
      [
        dims.b,
        77,
        32,
      ],
    ),
    ...extra,
  };
  if (io.hasTimestepCond) {
    feeds[io.inputs.timestep_cond.name] = floatTensor(io.inputs.timestep_cond.dtype, f.tcond!, [
      dims.b,
      256,
    ]);
  }
  const out = await s.run(feeds);
  const y = out[io.outputs.out_sample.name];
  deepStrictEqual(y.dims, [dims.b, 4, dims.h, dims.w]);
  return toFloat32(y);
}

const D = { b: 2, h: 8, w: 6 }; // a 64×48 image: odd sizes deeper in the pyramid (6→3→2→1)
const base: UnetFeeds = {
  sample: wave(2 * 4 * 8 * 6),
  t: 500,
  ehs: wave(2 * 77 * 32, 1),
  tcond: wave(2 * 256, 2),
};

Deno.test("unet: every flavour runs through checkSession + timestepTensor; all inputs matter", async () => {
  const results: Record<string, Float32Array> = {};
  for (const dir of ["sd15", "sd15-optimum", "sd15-optimum-scalar", "sd15-lcm", "sd15-fp16"]) {
    await withSession(`${dir}/unet/model.onnx`, async (s) => {
      const io = checkSession("unet", s);
      const y = await runUnet(s, io, base, D);
      ok(y.every(Number.isFinite), dir);
      results[dir] = y;
      const changes: [string, UnetFeeds][] = [
        ["sample", { ...base, sample: wave(base.sample.length, 5) }],
        ["timestep", { ...base, t: 900 }],
        ["encoder_hidden_states", { ...base, ehs: wave(base.ehs.length, 6) }],
      ];
      if (io.hasTimestepCond) changes.push(["timestep_cond", { ...base, tcond: wave(512, 7) }]);
      for (const [name, f] of changes) {
        ok(maxAbsDiff(await runUnet(s, io, f, D), y) > 1e-4, `${dir}: ${name} changes out_sample`);
      }
    });
  }
  // Same seed, same weights: float [batch], int64 [steps] and scalar timesteps agree for t = 500.
  ok(maxAbsDiff(results["sd15"], results["sd15-optimum"]) < 1e-5);
  ok(maxAbsDiff(results["sd15"], results["sd15-optimum-scalar"]) < 1e-5);
  // fp16 I/O only rounds inputs and outputs.
  ok(maxAbsDiff(results["sd15"], results["sd15-fp16"]) < 2e-2);
  // timestep_cond adds a term.
  ok(maxAbsDiff(results["sd15-optimum"], results["sd15-lcm"]) > 1e-4);
});

Deno.test("unet: a [1] timestep broadcasts over the batch; batch items are independent", async () => {
  // Optimum's `steps` axis is its own dim, so [1] and [batch] feeds are both valid.
  await withSession("sd15-optimum/unet/model.onnx", async (s) => {
    const io = checkSession("unet", s);
    strictEqual(io.timestep!.kind, "steps");
    const y = await runUnet(s, io, base, D);
    const one = await runUnet(s, { ...io, timestep: { ...io.timestep!, kind: "one" } }, base, D);
    ok(maxAbsDiff(y, one) < 1e-6);
    const half = base.sample.length / 2;
    const changed = Float32Array.from(base.sample);
    changed[half + 3] += 1; // second batch item only
    const y2 = await runUnet(s, io, { ...base, sample: changed }, D);
    strictEqual(maxAbsDiff(y.subarray(0, half), y2.subarray(0, half)), 0);
    ok(maxAbsDiff(y.subarray(half), y2.subarray(half)) > 1e-5);
  });
});

Deno.test("vae decoder ×8 with output in [-1,1]; encoder ÷8 with latent_sample or latent_parameters", async () => {
  const latent = wave(4 * 8 * 6);
  for (const dir of ["sd15", "sd15-optimum", "sd15-fp16"]) {
    await withSession(`${dir}/vae_decoder/model.onnx`, async (s) => {
      const io = checkSession("vae_decoder", s);
      const run = async (z: Float32Array) => {
        const out = await s.run({
          [io.inputs.latent_sample.name]: floatTensor(io.inputs.latent_sample.dtype, z, [
            1,
            4,
            8,
            6,
          ]),
        });
        const img = out[io.outputs.sample.name];
        deepStrictEqual(img.dims, [1, 3, 64, 48]);
        return toFloat32(img);
      };
      const img = await run(latent);
      ok(img.every((v) => v >= -1 && v <= 1), `${dir} output in [-1,1]`);
      ok(Math.max(...img) - Math.min(...img) > 0.1, `${dir} output is not flat`);
      ok(maxAbsDiff(await run(wave(latent.length, 3)), img) > 1e-3);
    });
  }
  const image = wave(3 * 64 * 48);
  for (
    const [dir, name, channels] of [
      ["sd15", "latent_sample", 4],
      ["sd15-optimum", "latent_parameters", 8],
      ["sd15-fp16", "latent_sample", 4],
    ] as const
  ) {
    await withSession(`${dir}/vae_encoder/model.onnx`, async (s) => {
      const io = checkSession("vae_encoder", s);
      strictEqual(io.vaeEncoderOutput, name);
      strictEqual(io.latentChannels, channels);
      const run = async (x: Float32Array) => {
        const out = await s.run({
          [io.inputs.sample.name]: floatTensor(io.inputs.sample.dtype, x, [1, 3, 64, 48]),
        });
        const z = out[name];
        deepStrictEqual(z.dims, [1, channels, 8, 6]);
        return toFloat32(z);
      };
      const z = await run(image);
      ok(maxAbsDiff(await run(wave(image.length, 4)), z) > 1e-3);
      if (channels === 8) {
        // mean ‖ logvar: logvar around -4 keeps DiagonalGaussianDistribution's std small.
        const logvar = z.subarray(4 * 48);
        const mean = logvar.reduce((a, b) => a + b, 0) / logvar.length;
        ok(mean > -6 && mean < -2, `logvar mean ${mean}`);
      }
    });
  }
});

Deno.test("checkSession rejects a wrongly typed model with the exact message", async () => {
  const g = new Graph("bad_unet");
  const sample = g.input("sample", "float32", ["batch", 4, "height", "width"]);
  const t = g.input("timestep", "int8", ["batch"]);
  const ehs = g.input("encoder_hidden_states", "float32", ["batch", "sequence", 32]);
  const tf = g.op("Cast", [t], { to: { i: 1 } });
  const pooled = g.op("ReduceMean", [ehs], { axes: { ints: [1, 2] }, keepdims: { i: 1 } });
  const sum = g.op("Add", [
    g.op("Add", [sample, g.op("Unsqueeze", [tf, g.constI64([1, 2, 3])])]),
    g.op("Unsqueeze", [pooled, g.constI64([3])]),
  ]);
  g.output(sum, "out_sample", "float32", ["batch", 4, "height", "width"]);
  const bad = g.encode({ opset: 17 });
  const { createSessionFromBytes } = await import("../onnx/mod.ts");
  const s = await createSessionFromBytes(bad.model, [], { label: "bad" });
  try {
    strictEqual(s.inputs[1].dtype, "int8");
    throws(() => checkSession("unet", s), {
      message: "unet input `timestep`: expected one of float32/float16/int64, got int8",
    });
    throws(
      () => checkSession("vae_decoder", s),
      /^Error: vae_decoder input `latent_sample`: missing/,
    );
  } finally {
    await s.release();
  }
});
