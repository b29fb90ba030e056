/**
 * The engine's image-to-image held against diffusers 0.25.0's own code
 * (`testdata/img2img_reference.json`, written by
 * `testdata/make_img2img_reference.py`: the schedulers, the VAE's
 * `DiagonalGaussianDistribution` and the pipelines' `retrieve_latents`,
 * `get_timesteps`, `prepare_latents`, `retrieve_timesteps`, run on a stub
 * UNet and stub distribution parameters). The engine runs its real path —
 * the schedule cut, the encoder sample and the noise from one
 * torch-compatible generator, `add_noise`, the loop with CFG, the LCM
 * variants — on stub sessions that compute what the Python stubs compute,
 * for every scheduler at strengths 0.3, 0.75 and 1.
 *
 * DPM-Solver++: this project's scheduler is the current diffusers class,
 * whose default `final_sigmas_type = "zero"` (diffusers ≥ 0.26) ends on σ = 0
 * with a first-order step; 0.25.0 ends on σ_min (`sigma_last`, or the last
 * Karras sigma repeated) and takes that step at second order. With
 * `final_sigmas_type: "sigma_min"` in the scheduler config the class is
 * 0.25.0's, so the DPM cases run with a set whose config says so.
 */

import { ok, strictEqual } from "node:assert";
import { join } from "node:path";
import { type Feeds, type IoMeta, Tensor, toFloat32 } from "../onnx/mod.ts";
import type { SchedulerName } from "../schedulers/mod.ts";
import { tinyConfig, tinyModels } from "./_testing.ts";
import { createEngine } from "./engine.ts";
import type { BytesOpener, ModelSession, SessionOpener } from "./model_session.ts";

const fixture = JSON.parse(
  await Deno.readTextFile(new URL("./testdata/img2img_reference.json", import.meta.url)),
) as {
  steps: number;
  seed: number;
  latent: [number, number, number, number];
  params: string;
  cases: Array<{
    scheduler: string;
    pipeline: "stable_diffusion" | "latent_consistency";
    strength: number;
    timesteps: number[];
    start: string;
    firstInput: string;
    final: string;
    decoderInput: string;
  }>;
};

const f32 = (b64: string) => new Float32Array(Uint8Array.fromBase64(b64).buffer);
const root = await tinyModels("image-to-image-reference");

/**
 * A base folder whose scheduler config ends DPM-Solver on σ_min, as diffusers
 * 0.25.0 does; the stubs stand in for every model but the VAE encoder, whose
 * graph the loader rewrites.
 */
async function sigmaMinBase(): Promise<string> {
  const base = join(root, "..", "sd15-dpm-sigma-min");
  const from = join(root, "sd15");
  for (
    const dir of ["text_encoder", "unet", "vae_decoder", "vae_encoder", "tokenizer", "scheduler"]
  ) {
    await Deno.mkdir(join(base, dir), { recursive: true });
  }
  for (const f of ["text_encoder", "unet", "vae_decoder"]) {
    await Deno.writeFile(join(base, f, "model.onnx"), new Uint8Array());
  }
  await Deno.copyFile(join(from, "vae_encoder/model.onnx"), join(base, "vae_encoder/model.onnx"));
  for await (const e of Deno.readDir(join(from, "tokenizer"))) {
    await Deno.copyFile(join(from, "tokenizer", e.name), join(base, "tokenizer", e.name));
  }
  const config = JSON.parse(await Deno.readTextFile(join(from, "scheduler/scheduler_config.json")));
  await Deno.writeTextFile(
    join(base, "scheduler/scheduler_config.json"),
    JSON.stringify({ ...config, final_sigmas_type: "sigma_min" }),
  );
  return base;
}
const dpmBase = await sigmaMinBase();
const [, , h, w] = fixture.latent;
const fround = Math.fround;

function stub(
  inputs: IoMeta[],
  outputs: IoMeta[],
  run: (feeds: Feeds) => Tensor,
): ModelSession {
  return {
    inputs,
    outputs,
    run: (feeds) => Promise.resolve({ [outputs[0].name]: run(feeds) }),
    release: () => Promise.resolve(),
  };
}

const F = "float32";

/** Stub sessions: what the Python stubs compute, with the contract's I/O. */
function stubs(lcmUnet: boolean) {
  const recorded = {
    timesteps: [] as number[],
    samples: [] as Float32Array[],
    decoded: [] as Float32Array[],
  };
  const open: SessionOpener = (_path, options) => {
    switch (options.label) {
      case "text_encoder":
        return Promise.resolve(stub(
          [{ name: "input_ids", dtype: "int32", shape: ["batch", "sequence"] }],
          [{ name: "last_hidden_state", dtype: F, shape: ["batch", "sequence", 32] }],
          (feeds) => {
            const [b, s] = feeds.input_ids.dims;
            return new Tensor(F, new Float32Array(b * s * 32), [b, s, 32]);
          },
        ));
      case "unet":
        return Promise.resolve(stub(
          [
            { name: "sample", dtype: F, shape: ["batch", 4, "height", "width"] },
            { name: "timestep", dtype: F, shape: ["batch"] },
            { name: "encoder_hidden_states", dtype: F, shape: ["batch", "sequence", 32] },
            ...(lcmUnet ? [{ name: "timestep_cond", dtype: F, shape: ["batch", 256] }] : []),
          ],
          [{ name: "out_sample", dtype: F, shape: ["batch", 4, "height", "width"] }],
          (feeds) => {
            // 0.1 · sample + 0.001 · t, float32 tensor ops with float32 scalars.
            const x = toFloat32(feeds.sample);
            const t = toFloat32(feeds.timestep)[0];
            recorded.timesteps.push(t);
            recorded.samples.push(x.slice());
            const c = fround(0.001 * t);
            const out = x.map((v) => fround(v * fround(0.1)) + c);
            return new Tensor(F, out, [...feeds.sample.dims]);
          },
        ));
      case "vae_decoder":
        return Promise.resolve(stub(
          [{ name: "latent_sample", dtype: F, shape: ["batch", 4, "height", "width"] }],
          [{ name: "sample", dtype: F, shape: ["batch", 3, "image_height", "image_width"] }],
          (feeds) => {
            recorded.decoded.push(toFloat32(feeds.latent_sample).slice());
            return new Tensor(F, new Float32Array(3 * 64 * h * w), [1, 3, 8 * h, 8 * w]);
          },
        ));
      default:
        throw new Error(`unexpected model ${options.label}`);
    }
  };
  const openBytes: BytesOpener = () =>
    Promise.resolve(stub(
      [{ name: "sample", dtype: F, shape: ["batch", 3, "height", "width"] }],
      [{
        name: "latent_parameters",
        dtype: F,
        shape: ["batch", 8, "height_latent", "width_latent"],
      }],
      () => new Tensor(F, f32(fixture.params), [1, 8, h, w]),
    ));
  return { open, openBytes, recorded };
}

/** Largest |a − b| relative to max(1, |b|); NaN only where both are NaN. */
function maxError(a: ArrayLike<number>, b: ArrayLike<number>): number {
  strictEqual(a.length, b.length);
  let worst = 0;
  for (let i = 0; i < a.length; i++) {
    if (Number.isNaN(b[i])) {
      ok(Number.isNaN(a[i]), `value ${i}: ${a[i]} where diffusers has NaN`);
      continue;
    }
    worst = Math.max(worst, Math.abs(a[i] - b[i]) / Math.max(1, Math.abs(b[i])));
  }
  return worst;
}

for (const c of fixture.cases) {
  const name = `${c.scheduler} (${c.pipeline}) at strength ${c.strength}`;
  Deno.test(`image-to-image against diffusers 0.25.0: ${name}`, async () => {
    const karras = c.scheduler === "dpmpp_2m_karras";
    const scheduler = (karras ? "dpmpp_2m" : c.scheduler) as SchedulerName;
    const lcmUnet = c.pipeline === "latent_consistency";
    const { open, openBytes, recorded } = stubs(lcmUnet);
    const tiny = tinyConfig(root, {
      generation: { steps: fixture.steps, scheduler, karras, guidanceScale: 7.5 },
    });
    const config = {
      ...tiny,
      models: { ...tiny.models, base: scheduler === "dpmpp_2m" ? dpmBase : tiny.models.base },
      imageToImage: { strengths: [] },
    };
    const engine = await createEngine(config, { openSession: open, openBytes });
    try {
      const image = { width: 8 * w, height: 8 * h, data: new Uint8Array(64 * w * h * 3) };
      await engine.generate({
        mode: "image_to_image",
        positive: "",
        negative: "",
        width: 8 * w,
        height: 8 * h,
        seed: fixture.seed,
        image,
        strength: c.strength,
      });
      const expected = c.timesteps.map(fround);
      strictEqual(recorded.timesteps.join(","), expected.join(","), "the timesteps");
      const n = 4 * h * w;
      // CFG (batch 2, uncond first) on a text-blind UNet: both halves are the latents.
      const first = recorded.samples[0].subarray(0, n);
      const inputError = maxError(first, f32(c.firstInput));
      ok(inputError < 1e-6, `first UNet input (start latents, scaled): error ${inputError}`);
      const decodeError = maxError(recorded.decoded[0], f32(c.decoderInput));
      ok(decodeError < 2e-5, `decoder input: error ${decodeError}`);
    } finally {
      await engine.release();
    }
  });
}
