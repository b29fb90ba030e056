import { deepStrictEqual, ok, strictEqual } from "node:assert";
import {
  checkSession,
  createSessionFromBytes,
  floatTensor,
  residualMismatches,
  type ResolvedIo,
  scalarTensor,
  type Session,
  type Tensor,
  timestepTensor,
  toFloat32,
} from "../onnx/mod.ts";
import { tinyModelFiles } from "./model_set.ts";
import { TINY_DIMS } from "./options.ts";
import { buildControlNet, buildUnet } from "./unet.ts";
import { maxAbsDiff, openBuilt, wave } from "./testing.ts";

const files = tinyModelFiles();
const B = 2;
const h = 8;
const w = 8;

// SD 1.5's residual pyramid at full size: channels 320/640/1280 and downscale
// ×1/×2/×4/×8 per residual;
// the tiny set maps 320/640/1280 → 8/16/32.
const FULL: [number, number][] = [
  [320, 1],
  [320, 1],
  [320, 1],
  [320, 2],
  [640, 2],
  [640, 2],
  [640, 4],
  [1280, 4],
  [1280, 4],
  [1280, 8],
  [1280, 8],
  [1280, 8],
  [1280, 8],
];
const TINY: Record<number, number> = { 320: 8, 640: 16, 1280: 32 };
const expectedDims = FULL.map(([c, k]) => [B, TINY[c], h / k, w / k]);

interface CnInputs {
  sample: Float32Array;
  t: number;
  ehs: Float32Array;
  cond: Float32Array;
  scale: number;
}
const base: CnInputs = {
  sample: wave(B * 4 * h * w),
  t: 700,
  ehs: wave(B * 77 * 32, 1),
  cond: Float32Array.from({ length: B * 3 * 8 * h * 8 * w }, (_, i) => (i % 97) / 97),
  scale: 1,
};

async function runControlNet(s: Session, io: ResolvedIo, x: CnInputs): Promise<Tensor[]> {
  const feeds: Record<string, Tensor> = {
    [io.inputs.sample.name]: floatTensor(io.inputs.sample.dtype, x.sample, [B, 4, h, w]),
    [io.timestep!.name]: timestepTensor(io.timestep!, x.t, B),
    [io.inputs.encoder_hidden_states.name]: floatTensor("float32", x.ehs, [B, 77, 32]),
    [io.inputs.controlnet_cond.name]: floatTensor("float32", x.cond, [B, 3, 8 * h, 8 * w]),
  };
  if (io.hasConditioningScale) {
    const p = io.inputs.conditioning_scale;
    feeds[p.name] = scalarTensor(p.dtype, x.scale, p.shape);
  }
  const out = await s.run(feeds);
  return io.residuals!.map((r) => out[r.name]);
}

const flat = (ts: Tensor[]) => ts.map((t) => Array.from(toFloat32(t))).flat();

Deno.test("controlnet: 13 residuals with SD 1.5's pyramid; scale multiplies; cond and sample matter", async () => {
  const outputs: number[][] = [];
  for (
    const path of ["controlnet/depth.onnx", "controlnet/openpose.onnx", "controlnet/inpaint.onnx"]
  ) {
    const s = await openBuilt(files, path);
    try {
      const io = checkSession("controlnet", s);
      strictEqual(io.residualNaming, "additional_residual");
      strictEqual(io.hasConditioningScale, true);
      strictEqual(io.inputs.conditioning_scale.dtype, "float64");
      deepStrictEqual(io.residuals!.map((r) => r.channels), FULL.map(([c]) => TINY[c]));

      const r1 = await runControlNet(s, io, base);
      deepStrictEqual(r1.map((t) => t.dims), expectedDims);
      const v1 = flat(r1);
      outputs.push(v1);
      const zero = flat(await runControlNet(s, io, { ...base, scale: 0 }));
      ok(zero.every((v) => v === 0), "scale 0 silences every residual");
      const v2 = flat(await runControlNet(s, io, { ...base, scale: 2 }));
      ok(maxAbsDiff(v2, v1.map((v) => 2 * v)) < 1e-5, "scale 2 doubles every residual");

      for (
        const [name, x] of [
          ["controlnet_cond", { ...base, cond: base.cond.map((v) => 1 - v) }],
          ["sample", { ...base, sample: wave(base.sample.length, 9) }],
          ["timestep", { ...base, t: 100 }],
          ["encoder_hidden_states", { ...base, ehs: wave(base.ehs.length, 8) }],
        ] as const
      ) {
        const r = await runControlNet(s, io, x);
        r.forEach((t, i) =>
          ok(
            maxAbsDiff(toFloat32(t), toFloat32(r1[i])) > 1e-6,
            `${path}: ${name} changes residual ${i}`,
          )
        );
      }
    } finally {
      await s.release();
    }
  }
  ok(maxAbsDiff(outputs[0], outputs[1]) > 1e-3, "depth and openpose ControlNets differ");
  ok(maxAbsDiff(outputs[1], outputs[2]) > 1e-3, "openpose and inpaint ControlNets differ");
});

Deno.test("controlnet_unet: zero residuals = plain UNet; every residual changes out_sample; chains with a ControlNet", async () => {
  const unet = await openBuilt(files, "sd15/unet/model.onnx");
  const cnUnet = await openBuilt(files, "sd15/controlnet_unet/model.onnx");
  const cn = await openBuilt(files, "controlnet/depth.onnx");
  try {
    const uIo = checkSession("unet", unet);
    const rIo = checkSession("controlnet_unet", cnUnet);
    const cIo = checkSession("controlnet", cn);
    deepStrictEqual(residualMismatches(cIo, rIo), []);
    strictEqual(rIo.residualNaming, "additional_residual");

    const common = {
      sample: floatTensor("float32", base.sample, [B, 4, h, w]),
      timestep: timestepTensor(uIo.timestep!, base.t, B),
      encoder_hidden_states: floatTensor("float32", base.ehs, [B, 77, 32]),
    };
    const plain = toFloat32((await unet.run(common)).out_sample);
    const zeros = (i: number, fill = 0) =>
      floatTensor(
        "float32",
        new Float32Array(expectedDims[i].reduce((a, b) => a * b, 1)).fill(fill),
        expectedDims[i],
      );
    const residualFeeds = (fillAt = -1) =>
      Object.fromEntries(rIo.residuals!.map((r, i) => [r.name, zeros(i, i === fillAt ? 0.25 : 0)]));
    const withZero = toFloat32((await cnUnet.run({ ...common, ...residualFeeds() })).out_sample);
    ok(maxAbsDiff(plain, withZero) < 1e-6, "same weights: zero residuals reproduce the UNet");
    for (let i = 0; i < 13; i++) {
      const y = toFloat32((await cnUnet.run({ ...common, ...residualFeeds(i) })).out_sample);
      ok(
        maxAbsDiff(y, withZero) > 1e-5,
        `residual ${i} (${rIo.residuals![i].name}) reaches out_sample`,
      );
    }

    // The pipeline's per-step order: run the ControlNet, bind its outputs by resolved index.
    const res = await runControlNet(cn, cIo, base);
    const bound = Object.fromEntries(rIo.residuals!.map((r, i) => [r.name, res[i]]));
    const guided = toFloat32((await cnUnet.run({ ...common, ...bound })).out_sample);
    ok(maxAbsDiff(guided, plain) > 1e-4);
  } finally {
    await Promise.all([unet.release(), cnUnet.release(), cn.release()]);
  }
});

Deno.test("onnx-web variants: positional ControlNet outputs, down_block_{i} UNet inputs, no scale input", async () => {
  const o = { flavour: "diffusers", io: "float32" } as const;
  const named = buildControlNet(1234, TINY_DIMS, { ...o, stream: "controlnet_depth" });
  const web = buildControlNet(1234, TINY_DIMS, {
    ...o,
    stream: "controlnet_depth",
    naming: "onnx_web",
    conditioningScale: false,
  });
  const webUnet = buildUnet(1234, TINY_DIMS, { ...o, residuals: "onnx_web" });
  const a = await createSessionFromBytes(named.model);
  const b = await createSessionFromBytes(web.model);
  const u = await createSessionFromBytes(webUnet.model, [{
    path: "weights.pb",
    data: webUnet.external!.data,
  }]);
  try {
    const aIo = checkSession("controlnet", a);
    const bIo = checkSession("controlnet", b);
    const uIo = checkSession("controlnet_unet", u);
    strictEqual(bIo.residualNaming, "position");
    strictEqual(bIo.hasConditioningScale, false);
    strictEqual(bIo.residuals![1].name, "mid_block_res_sample");
    strictEqual(uIo.residualNaming, "onnx_web");
    strictEqual(uIo.residuals![4].name, "down_block_4");
    deepStrictEqual(residualMismatches(bIo, uIo), []);
    // Same weights: position i of the onnx-web model is residual i of the named one (at scale 1).
    const ra = await runControlNet(a, aIo, base);
    const rb = await runControlNet(b, bIo, base);
    for (let i = 0; i < 13; i++) {
      ok(maxAbsDiff(toFloat32(ra[i]), toFloat32(rb[i])) < 1e-6, `residual ${i}`);
    }

    // A ControlNet with other channel widths is named residual by residual.
    const odd = buildControlNet(1, { ...TINY_DIMS, blockChannels: [8, 16, 24] }, {
      ...o,
      stream: "x",
    });
    const c = await createSessionFromBytes(odd.model);
    try {
      const problems = residualMismatches(checkSession("controlnet", c), uIo);
      deepStrictEqual(problems.map((p) => p.split(" ")[2]), ["7", "8", "9", "10", "11", "12"]);
      strictEqual(
        problems[0],
        "controlnet residual 7 (`down_block_7_additional_residual`) has 24 channels but controlnet_unet input `down_block_7` expects 32",
      );
    } finally {
      await c.release();
    }
  } finally {
    await Promise.all([a.release(), b.release(), u.release()]);
  }
});
