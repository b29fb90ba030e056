import { deepStrictEqual, ok, strictEqual, throws } from "node:assert";
import {
  assertResidualsMatch,
  checkSession,
  residualMismatches,
  residualName,
} from "./contract.ts";
import type { IoMeta, SessionIo } from "./runtime.ts";

// Metadata written from the exporters' descriptions (diffusers script, Optimum,
// Olive, OnnxStack, onnx-web; docs/models.md), not from this project's fixture builder.
const io = (inputs: readonly IoMeta[], outputs: readonly IoMeta[]): SessionIo => ({
  inputs,
  outputs,
});
const m = (name: string, dtype: string, shape: (number | string)[]): IoMeta => ({
  name,
  dtype,
  shape,
});

const diffusersUnet = (timestep: IoMeta, float = "float32") =>
  io([
    m("sample", float, ["batch", "channels", "height", "width"]),
    timestep,
    m("encoder_hidden_states", float, ["batch", "sequence", 768]),
  ], [m("out_sample", float, ["unet_dim_0", 4, "unet_dim_2", "unet_dim_3"])]);

/** [channels, downscale] of residual i at full size (diffusers `unet_2d_condition.py`). */
const RESIDUALS: [number, number][] = [
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

Deno.test("checkSession unet: diffusers float [batch], Optimum int64 [steps], scalar, fp16, LCM", () => {
  const d = checkSession("unet", diffusersUnet(m("timestep", "float32", ["batch"])));
  deepStrictEqual(d.timestep, { name: "timestep", dtype: "float32", kind: "batch" });
  strictEqual(d.hasTimestepCond, false);
  strictEqual(d.sampleChannels, "channels");
  strictEqual(d.hiddenSize, 768);
  strictEqual(d.inputs.encoder_hidden_states.name, "encoder_hidden_states");
  strictEqual(d.outputs.out_sample.name, "out_sample");

  const optimum = checkSession(
    "unet",
    io([
      m("sample", "float32", ["batch_size", 4, "height", "width"]),
      m("timestep", "int64", ["steps"]),
      m("encoder_hidden_states", "float32", ["batch_size", "sequence_length", 768]),
      m("timestep_cond", "float32", ["batch_size", 256]),
    ], [m("out_sample", "float32", ["batch_size", 4, "height", "width"])]),
  );
  deepStrictEqual(optimum.timestep, { name: "timestep", dtype: "int64", kind: "steps" });
  strictEqual(optimum.hasTimestepCond, true);
  strictEqual(optimum.sampleChannels, 4);

  const scalar = checkSession("unet", diffusersUnet(m("timestep", "float32", [])));
  strictEqual(scalar.timestep!.kind, "scalar");
  const one = checkSession("unet", diffusersUnet(m("timestep", "float32", [1])));
  strictEqual(one.timestep!.kind, "one");
  const fp16 = checkSession("unet", diffusersUnet(m("timestep", "float16", ["batch"]), "float16"));
  strictEqual(fp16.timestep!.dtype, "float16");
  strictEqual(fp16.inputs.sample.dtype, "float16");
});

Deno.test("checkSession: names the mismatch exactly", () => {
  throws(
    () => checkSession("unet", diffusersUnet(m("timestep", "int8", ["batch"]))),
    { message: "unet input `timestep`: expected one of float32/float16/int64, got int8" },
  );
  throws(
    () => checkSession("unet", diffusersUnet(m("timestep", "float32", ["batch", 1]))),
    { message: "unet input `timestep`: expected rank 0 or 1, got rank 2 [batch,1]" },
  );
  throws(
    () =>
      checkSession(
        "unet",
        io([
          m("sample", "float32", [1, 4, 64, 64]),
          m("encoder_hidden_states", "float32", [1, 77, 768]),
        ], [
          m("out_sample", "float32", [1, 4, 64, 64]),
        ]),
      ),
    { message: "unet input `timestep`: missing (model inputs: sample, encoder_hidden_states)" },
  );
  const extra = diffusersUnet(m("timestep", "float32", ["batch"]));
  throws(
    () => checkSession("unet", io([...extra.inputs, m("return_dict", "bool", [])], extra.outputs)),
    /^Error: unet input `return_dict`: not part of the unet contract \(expected inputs: sample, timestep, encoder_hidden_states, timestep_cond\)$/,
  );
  throws(
    () =>
      checkSession(
        "text_encoder",
        io([m("input_ids", "float32", ["batch", "sequence"])], [
          m("last_hidden_state", "float32", ["batch", "sequence", 768]),
        ]),
      ),
    { message: "text_encoder input `input_ids`: expected one of int32/int64, got float32" },
  );
  throws(
    () =>
      checkSession(
        "vae_decoder",
        io([m("latent_sample", "float32", ["batch", 8, "h", "w"])], [
          m("sample", "float32", ["batch", 3, "H", "W"]),
        ]),
      ),
    { message: "vae_decoder input `latent_sample`: expected dim 1 = 4, got 8 [batch,8,h,w]" },
  );
});

Deno.test("checkSession text_encoder: int32 (diffusers) and int64 (Optimum); pooler optional", () => {
  const a = checkSession(
    "text_encoder",
    io([m("input_ids", "int32", ["batch", "sequence"])], [
      m("last_hidden_state", "float32", ["batch", "sequence", 768]),
      m("pooler_output", "float32", ["batch", 768]),
    ]),
  );
  strictEqual(a.inputs.input_ids.dtype, "int32");
  strictEqual(a.hiddenSize, 768);
  ok(a.outputs.pooler_output);
  const b = checkSession(
    "text_encoder",
    io([m("input_ids", "int64", ["batch_size", "sequence_length"])], [
      m("last_hidden_state", "float16", ["batch_size", "sequence_length", 768]),
    ]),
  );
  strictEqual(b.inputs.input_ids.dtype, "int64");
  strictEqual(b.outputs.pooler_output, undefined);
});

Deno.test("checkSession vae_encoder: latent_sample (4) vs latent_parameters (8)", () => {
  const s = checkSession(
    "vae_encoder",
    io([m("sample", "float32", ["batch", "channels", "height", "width"])], [
      m("latent_sample", "float32", ["batch", 4, "h", "w"]),
    ]),
  );
  strictEqual(s.vaeEncoderOutput, "latent_sample");
  strictEqual(s.latentChannels, 4);
  const p = checkSession(
    "vae_encoder",
    io([m("sample", "float32", ["batch_size", 3, "sample_height", "sample_width"])], [
      m("latent_parameters", "float32", ["batch_size", 8, "height", "width"]),
    ]),
  );
  strictEqual(p.vaeEncoderOutput, "latent_parameters");
  strictEqual(p.latentChannels, 8);
  throws(
    () =>
      checkSession(
        "vae_encoder",
        io([m("sample", "float32", [1, 3, 512, 512])], [
          m("latent_parameters", "float32", [1, 4, 64, 64]),
        ]),
      ),
    { message: "vae_encoder output `latent_parameters`: expected dim 1 = 8, got 4 [1,4,64,64]" },
  );
});

const cnInputs = [
  m("sample", "float32", ["batch", 4, "height", "width"]),
  m("timestep", "float32", ["batch"]),
  m("encoder_hidden_states", "float32", ["batch", "sequence", 768]),
  m("controlnet_cond", "float32", ["batch", 3, "H", "W"]),
];
const residualMeta = (names: (i: number) => string, scaleChannels = (c: number) => c) =>
  RESIDUALS.map(([c, k], i) => m(names(i), "float32", [2, scaleChannels(c), 64 / k, 64 / k]));

Deno.test("checkSession controlnet: OnnxStack names, and onnx-web outputs by position", () => {
  const named = checkSession(
    "controlnet",
    io([...cnInputs, m("conditioning_scale", "float64", [])], residualMeta(residualName).reverse()),
  );
  strictEqual(named.residualNaming, "additional_residual");
  strictEqual(named.hasConditioningScale, true);
  strictEqual(named.inputs.conditioning_scale.dtype, "float64");
  deepStrictEqual(named.residuals!.map((r) => r.name), RESIDUALS.map((_, i) => residualName(i)));
  deepStrictEqual(named.residuals!.map((r) => r.channels), RESIDUALS.map(([c]) => c));

  // dakenf/diffusers.js: down_block_0 ← down_block_res_samples, down_block_1 ←
  // mid_block_res_sample, 2..11 ← '24549'..'24567', mid ← '24569'.
  const webNames = ["down_block_res_samples", "mid_block_res_sample"];
  for (let n = 24549; n <= 24569; n += 2) webNames.push(String(n));
  const web = checkSession("controlnet", io(cnInputs, residualMeta((i) => webNames[i])));
  strictEqual(web.residualNaming, "position");
  strictEqual(web.hasConditioningScale, false);
  strictEqual(web.residuals![1].name, "mid_block_res_sample");
  strictEqual(web.residuals![1].channels, 320);
  strictEqual(web.residuals![12].name, "24569");
  strictEqual(web.residuals![12].channels, 1280);

  throws(
    () => checkSession("controlnet", io(cnInputs, residualMeta(residualName).slice(0, 12))),
    /^Error: controlnet outputs: expected 13 residuals named .* got 12 \(down_block_0_additional_residual,/,
  );
});

Deno.test("checkSession controlnet_unet + residualMismatches", () => {
  const unetBase = diffusersUnet(m("timestep", "float32", ["batch"]));
  const cnUnet = checkSession(
    "controlnet_unet",
    io([...unetBase.inputs, ...residualMeta(residualName)], unetBase.outputs),
  );
  strictEqual(cnUnet.residualNaming, "additional_residual");
  strictEqual(cnUnet.residuals!.length, 13);
  const webUnet = checkSession(
    "controlnet_unet",
    io([
      ...unetBase.inputs,
      ...residualMeta((i) => (i === 12 ? "mid_block_additional_residual" : `down_block_${i}`)),
    ], unetBase.outputs),
  );
  strictEqual(webUnet.residualNaming, "onnx_web");
  strictEqual(webUnet.residuals![0].name, "down_block_0");

  const cn = checkSession(
    "controlnet",
    io([...cnInputs, m("conditioning_scale", "float64", [1])], residualMeta(residualName)),
  );
  deepStrictEqual(residualMismatches(cn, cnUnet), []);
  assertResidualsMatch(cn, webUnet);

  // A ControlNet for a UNet whose 1280 blocks are 1024 wide (e.g. a different base).
  const other = checkSession(
    "controlnet",
    io(cnInputs, residualMeta(residualName, (c) => (c === 1280 ? 1024 : c))),
  );
  const problems = residualMismatches(other, webUnet);
  strictEqual(problems.length, 6); // residuals 7..12
  strictEqual(
    problems[0],
    "controlnet residual 7 (`down_block_7_additional_residual`) has 1024 channels but " +
      "controlnet_unet input `down_block_7` expects 1280",
  );
  throws(
    () => assertResidualsMatch(other, cnUnet),
    /controlnet residual 12 \(`mid_block_additional_residual`\)/,
  );

  // Fully dynamic OnnxStack exports: nothing to compare statically.
  const dynamic = checkSession(
    "controlnet",
    io(cnInputs, RESIDUALS.map((_, i) => m(residualName(i), "float32", ["b", "c", "h", "w"]))),
  );
  strictEqual(dynamic.residuals![0].channels, "c");
  deepStrictEqual(residualMismatches(dynamic, cnUnet), []);

  throws(
    () => checkSession("controlnet_unet", unetBase),
    {
      message:
        "controlnet_unet input `down_block_0_additional_residual` or `down_block_0`: missing (model inputs: sample, timestep, encoder_hidden_states)",
    },
  );
});

Deno.test("checkSession annotators: depth, YOLOX detector, DWPose estimator", () => {
  const depth = checkSession(
    "depth",
    io([m("x", "float16", [1, 3, 512, 512])], [m("y", "float16", [1, 512, 512])]),
  );
  strictEqual(depth.depthOutputRank, 3);
  deepStrictEqual(depth.imageSize, { height: 512, width: 512 });
  strictEqual(depth.inputs.image.name, "x");
  const midas = checkSession(
    "depth",
    io([m("pixel_values", "float32", ["batch", 3, "height", "width"])], [
      m("predicted_depth", "float32", ["batch", 1, "height", "width"]),
    ]),
  );
  strictEqual(midas.depthOutputRank, 4);
  throws(
    () =>
      checkSession(
        "depth",
        io([m("x", "float32", [1, 1, 256, 256])], [m("y", "float32", [1, 256, 256])]),
      ),
    { message: "depth input `x`: expected dim 1 = 3, got 1 [1,1,256,256]" },
  );
  throws(
    () =>
      checkSession(
        "depth",
        io([m("a", "float32", [1, 3, 8, 8]), m("b", "float32", [1, 3, 8, 8])], [
          m("y", "float32", [1, 8, 8]),
        ]),
      ),
    { message: "depth: expected 1 input(s), got 2 (a, b)" },
  );

  const det = checkSession(
    "pose_detector",
    io([m("images", "float32", [1, 3, 640, 640])], [m("output", "float32", [1, 8400, 85])]),
  );
  deepStrictEqual(det.imageSize, { height: 640, width: 640 });
  strictEqual(det.outputs.detections.name, "output");
  throws(
    () =>
      checkSession(
        "pose_detector",
        io([m("images", "float32", [1, 3, 640, 640])], [m("output", "float32", [1, 8400, 4])]),
      ),
    /pose_detector output `output`: expected dim 2 >= 6/,
  );

  const pose = checkSession(
    "pose_estimator",
    io([m("input", "float32", [1, 3, 384, 288])], [
      m("simcc_y", "float32", [1, 133, 768]),
      m("simcc_x", "float32", [1, 133, 576]),
    ]),
  );
  strictEqual(pose.outputs.simcc_x.name, "simcc_x"); // by name, not position
  strictEqual(pose.keypoints, 133);
  deepStrictEqual(pose.imageSize, { height: 384, width: 288 });
  const positional = checkSession(
    "pose_estimator",
    io([m("input", "float32", ["N", 3, 384, 288])], [
      m("1", "float32", ["N", 133, 576]),
      m("2", "float32", ["N", 133, 768]),
    ]),
  );
  strictEqual(positional.outputs.simcc_y.name, "2");
  throws(
    () =>
      checkSession(
        "pose_estimator",
        io([m("input", "float32", [1, 3, 384, 288])], [
          m("simcc_x", "float32", [1, 133, 576]),
          m("simcc_y", "float32", [1, 17, 768]),
        ]),
      ),
    { message: "pose_estimator outputs: `simcc_x` has 133 keypoints but `simcc_y` has 17" },
  );
});
