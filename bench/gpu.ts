/**
 * `deno task bench:gpu`: the GPU measurement, one process, rerunnable by
 * anyone with a GPU (docs/gpu.md, "Measuring a GPU"). On one model set and
 * one execution provider it measures:
 *
 * - start-up of the provider (the check of `mod/onnx`: adapter, float16);
 * - per component, with CPU I/O: the text encoder (batch 2), one UNet step
 *   at batch 2 (CFG), the full VAE decoder and the tiny one (TAESD), and a
 *   one-node model with the UNet's latent shape: what the latents cost to
 *   go through the CPU at every step (the scheduler runs in JavaScript);
 * - whole images through the engine (the real I/O plumbing, hidden states
 *   left on the GPU): the default preset's 25 PNDM steps with guidance 7.5,
 *   and the fast preset's 4 LCM steps without guidance (the LCM LoRA's merge
 *   is not part of it: the same UNet runs, which is what a step costs);
 * - peak GPU memory (NVIDIA: `nvidia-smi` sampled by a child process, the
 *   whole device minus what was in use before the models were loaded);
 * - agreement with the CPU provider on the same model files and inputs: the
 *   UNet's noise prediction for one input (max absolute error, max error
 *   relative to the largest value, mean absolute error) and the final image
 *   of a short run (PSNR and largest grey-level difference);
 * - with `--torch PYTHON`: the same UNet file, weights and inputs in PyTorch
 *   (`torch_onnx.py` runs the ONNX graph node by node; on CUDA when torch has
 *   it, else `--torch-device`): its step time, peak memory and agreement with
 *   both ONNX Runtime runs.
 *
 * ```sh
 * deno task bench:gpu [--provider webgpu|cuda|cpu] [--full | --root DIR] [--set sd15]
 *   [--size 512] [--steps 25] [--runs 5] [--agreement-steps 4] [--reference cpu|none]
 *   [--torch PYTHON [--torch-device cuda|cpu]] [--out FILE]
 * ```
 *
 * Without `--full` or `--root` it runs on the test-sized set
 * (tests/fixtures/tiny/models, 64×64): seconds, for checking the script
 * itself; numbers from it say nothing about speed. `--full` builds the
 * full-size fp16 set outside the repository first (`buildFullSet`,
 * `$SD_MCP_BENCH_CACHE`), about 2 GB of random weights, or the fp32 one (4 GB)
 * when the device has no 16-bit floats; on the test-sized set the folder is
 * `sd15-fp16`, or `sd15` (fp32 I/O) without them. `--set` overrides. The JSON
 * report goes to `--out` (default `.cache/bench/gpu.json`) and stdout; a
 * summary goes to stderr.
 *
 * @module
 */

import { dirname, join } from "node:path";
import { type Help, printHelp, wantsHelp } from "../mod/cli/mod.ts";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import {
  castFloatTensor,
  checkExecutionProvider,
  checkSession,
  createSession,
  createSessionFromBytes,
  type ExecutionProvider,
  type Feeds,
  floatTensor,
  intTensor,
  type ProviderCheck,
  type Session,
  type Tensor,
  timestepTensor,
  toFloat32,
} from "../mod/onnx/mod.ts";
import { Graph } from "../tests/fixtures/builder/mod.ts";
import { createEngine, type EngineConfig, type GenerationSettings } from "../mod/pipeline/mod.ts";
import { TorchGenerator } from "../mod/random/mod.ts";
import { ClipTokenizer } from "../mod/tokenizer/mod.ts";
import { buildFullSet } from "./full_models.ts";
import { exportForTorch } from "./torch_export.ts";

const REPO = fileURLToPath(new URL("../", import.meta.url));

/** The test-sized model set `deno task fixtures` builds. */
export const TINY_ROOT = join(REPO, "tests/fixtures/tiny/models");

/** min / median / mean of a sample, ms. */
export interface Stats {
  /** Fastest sample. */
  min: number;
  /** Median sample. */
  median: number;
  /** Mean of the samples. */
  mean: number;
  /** Every sample, in order. */
  samples: number[];
}

/** Agreement of two float arrays of the same length. */
export interface Agreement {
  /** Values that are NaN or infinite in one array and not equal in the other. */
  nonFinite: number;
  /** max |a − b|. */
  maxAbs: number;
  /** max |a − b| / max |a|: the largest error relative to the reference's range. */
  maxRel: number;
  /** mean |a − b|. */
  meanAbs: number;
  /** max |a| of the reference. */
  refMaxAbs: number;
}

/** Agreement of two 8-bit images of one size. */
export interface ImageAgreement {
  /** 10·log10(255² / MSE) in dB; Infinity for identical images. */
  psnrDb: number;
  /** Largest difference of one channel value, in grey levels. */
  maxDiff: number;
}

/** What one run of the script reports. */
export interface GpuReport {
  /** The command's options, resolved. */
  options: Record<string, unknown>;
  /** The machine as the tools see it (GPU name and driver where they answer). */
  machine: { gpu: string | null; vulkan: string | null; cpus: number };
  /** The provider check. */
  provider: ProviderCheck & { ms: number };
  /** The model set used and its UNet's I/O dtype. */
  set: { root: string; folder: string; unetDtype: string };
  /** Per component on the provider, ms. */
  components: {
    textEncoderBatch2: Stats;
    unetStepBatch2: Stats;
    vaeDecodeFull: Stats;
    vaeDecodeTiny: Stats | null;
    /** The latents through the CPU: a one-node model with the UNet's sample shape and dtype. */
    latentRoundTrip: Stats & { bytesEachWay: number };
  };
  /** Engine load and whole images on the provider, ms. */
  images: {
    loadMs: number;
    defaultPreset: { steps: number; totalMs: number[] };
    fastPreset: { steps: number; totalMs: number[] };
  };
  /** Peak GPU memory above the baseline, MiB (NVIDIA only; null elsewhere, with why). */
  gpuMemory: { baselineMiB: number; peakMiB: number } | { unavailable: string };
  /** The same UNet step in PyTorch (with `--torch`). */
  torch?: {
    /** torch's device ("cuda", "cpu") and version, and the output's dtype. */
    device: string;
    version: string;
    dtype: string;
    /** One UNet step at batch 2 (after a warm-up), ms. */
    unetStepBatch2: Stats;
    /** `torch.cuda.max_memory_allocated`, MiB (null on the CPU). */
    peakMiB: number | null;
    /** Its noise prediction against the CPU provider's (absent with `--reference none`)… */
    vsCpu?: Agreement;
    /** …and against the measured provider's. */
    vsProvider: Agreement;
  };
  /** Agreement with the CPU provider (absent with `--reference none`). */
  agreement?: {
    noisePrediction: Agreement;
    image: ImageAgreement & { steps: number };
    cpuUnetStepBatch2Ms: number;
  };
}

/** Summary statistics of a sample. */
export function stats(samples: readonly number[]): Stats {
  const s = [...samples].sort((a, b) => a - b);
  const m = s.length >> 1;
  const median = s.length === 0 ? NaN : s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
  const mean = s.reduce((a, b) => a + b, 0) / s.length;
  return { min: s[0] ?? NaN, median, mean, samples: [...samples] };
}

/** How far `actual` is from `reference` (see {@link Agreement}). */
export function agreement(reference: Float32Array, actual: Float32Array): Agreement {
  if (reference.length !== actual.length) {
    throw new Error(`agreement: ${reference.length} vs ${actual.length} values`);
  }
  let maxAbs = 0;
  let sum = 0;
  let refMaxAbs = 0;
  let nonFinite = 0;
  for (let i = 0; i < reference.length; i++) {
    const a = reference[i];
    const b = actual[i];
    if (!Number.isFinite(a) || !Number.isFinite(b)) {
      if (!Object.is(a, b)) nonFinite++;
      continue;
    }
    const d = Math.abs(a - b);
    if (d > maxAbs) maxAbs = d;
    sum += d;
    refMaxAbs = Math.max(refMaxAbs, Math.abs(a));
  }
  return {
    nonFinite,
    maxAbs,
    maxRel: refMaxAbs > 0 ? maxAbs / refMaxAbs : maxAbs === 0 ? 0 : Infinity,
    meanAbs: sum / reference.length,
    refMaxAbs,
  };
}

/** PSNR and largest difference of two 8-bit images of one size. */
export function imageAgreement(reference: Uint8Array, actual: Uint8Array): ImageAgreement {
  if (reference.length !== actual.length) {
    throw new Error(`imageAgreement: ${reference.length} vs ${actual.length} bytes`);
  }
  let se = 0;
  let maxDiff = 0;
  for (let i = 0; i < reference.length; i++) {
    const d = reference[i] - actual[i];
    se += d * d;
    maxDiff = Math.max(maxDiff, Math.abs(d));
  }
  const mse = se / reference.length;
  return { psnrDb: mse === 0 ? Infinity : 10 * Math.log10((255 * 255) / mse), maxDiff };
}

/** Times `runs` calls of `fn` after `warmup` untimed ones. */
async function timed(runs: number, warmup: number, fn: () => Promise<unknown>): Promise<Stats> {
  for (let i = 0; i < warmup; i++) await fn();
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    await fn();
    samples.push(performance.now() - t0);
  }
  return stats(samples);
}

/** Normal values from the torch-compatible generator, as the pipeline draws its noise. */
function normal(n: number, seed: number): Float32Array {
  const g = new TorchGenerator(seed);
  return g.randn(n);
}

/** `y = -x` over the UNet's sample shape: the smallest model that moves latents both ways. */
function roundTripModel(dtype: "float32" | "float16"): Uint8Array {
  const g = new Graph("latent_round_trip");
  const x = g.input("x", dtype, ["batch", 4, "height", "width"]);
  g.output(g.op("Neg", [x]), "y", dtype, ["batch", 4, "height", "width"]);
  return g.encode({ opset: 17 }).model;
}

/** Samples `nvidia-smi`'s used memory every 100 ms in a child process (it runs while ORT blocks us). */
function sampleGpuMemory(): { stop(): Promise<GpuReport["gpuMemory"]> } {
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command("nvidia-smi", {
      args: ["--query-gpu=memory.used", "--format=csv,noheader,nounits", "-lms", "100"],
      stdout: "piped",
      stderr: "null",
    }).spawn();
  } catch (e) {
    const why = `nvidia-smi could not run (${(e as Error).message}); not an NVIDIA machine?`;
    return { stop: () => Promise.resolve({ unavailable: why }) };
  }
  const text = new Response(child.stdout).text();
  return {
    async stop() {
      try {
        child.kill("SIGTERM");
      } catch { /* already gone */ }
      await child.status;
      // One line per sample; several GPUs give one value each per sample: take the first GPU's.
      const values = (await text).split("\n").map((l) => Number(l.trim().split(",")[0]))
        .filter((v) => Number.isFinite(v) && v > 0);
      if (values.length === 0) return { unavailable: "nvidia-smi printed no memory samples" };
      return { baselineMiB: values[0], peakMiB: Math.max(...values) - values[0] };
    },
  };
}

/** The first line of a tool's answer, or null when the tool is missing or fails. */
async function probeTool(cmd: string, args: string[], pick: RegExp): Promise<string | null> {
  try {
    const out = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "null" }).output();
    const text = new TextDecoder().decode(out.stdout);
    const lines = text.split("\n").filter((l) => pick.test(l)).map((l) => l.trim());
    return out.success && lines.length > 0 ? lines.join("; ") : null;
  } catch {
    return null;
  }
}

/** The engine config for one provider on `root/folder` (full or tiny VAE by `vae`). */
function engineConfig(
  root: string,
  folder: string,
  provider: ExecutionProvider,
  generation: GenerationSettings,
): EngineConfig {
  const off = { enabled: false, model: "", conditioningScale: 1 };
  return {
    models: { base: join(root, folder), controlnetUnet: "" },
    runtime: {
      executionProvider: provider,
      intraOpThreads: 0,
      interOpThreads: 0,
      graphOptimization: "all",
      cpuMemArena: false,
      memoryPattern: true,
      imageSessions: { cpuMemArena: false, memoryPattern: true },
      executionMode: "sequential",
      optimizedCache: null,
      warmUp: false,
    },
    generation,
    controlnet: {
      depth: { ...off, preprocessor: "", preprocessorInput: "unit" },
      openpose: { ...off, detector: "", estimator: "" },
      inpaint: { ...off, conditioningScale: 0.5 },
    },
  };
}

/** The default preset's settings with `steps`, and the fast preset's. */
const DEFAULT_PRESET: GenerationSettings = {
  steps: 25,
  guidanceScale: 7.5,
  scheduler: "pndm",
  timestepSpacing: undefined,
  karras: false,
  eta: 0,
};
const FAST_PRESET: GenerationSettings = {
  ...DEFAULT_PRESET,
  steps: 4,
  guidanceScale: 1,
  scheduler: "lcm",
};

/** Opens the four measured models of a set on `provider`. */
async function openComponents(root: string, folder: string, provider: ExecutionProvider) {
  const open = (path: string, label: string) =>
    createSession(path, { executionProvider: provider, label, cpuMemArena: false });
  const base = join(root, folder);
  const textEncoder = await open(join(base, "text_encoder/model.onnx"), "text_encoder");
  const unet = await open(join(base, "unet/model.onnx"), "unet");
  const vae = await open(join(base, "vae_decoder/model.onnx"), "vae_decoder");
  const tinyPath = join(root, "taesd/vae_decoder/model.onnx");
  const tiny = await Deno.stat(tinyPath).then(() => open(tinyPath, "tiny_vae_decoder"), () => null);
  return {
    textEncoder: { session: textEncoder, io: checkSession("text_encoder", textEncoder) },
    unet: { session: unet, io: checkSession("unet", unet) },
    vae: { session: vae, io: checkSession("vae_decoder", vae) },
    tiny: tiny ? { session: tiny, io: checkSession("vae_decoder", tiny) } : null,
    async release() {
      for (const s of [textEncoder, unet, vae, tiny]) await s?.release();
    },
  };
}

type Components = Awaited<ReturnType<typeof openComponents>>;

/** The text encoder's feed: the empty negative prompt and {@link PROMPT}, batch 2. */
function textFeeds(c: Components, tokenizer: ClipTokenizer): Feeds {
  const ids = [...tokenizer.encode("").ids, ...tokenizer.encode(PROMPT).ids];
  const te = c.textEncoder.io.inputs.input_ids;
  return { [te.name]: intTensor(te.dtype, ids, [2, ids.length / 2]) };
}

/** The fixed inputs of the other components (the same on every provider). */
function componentFeeds(c: Components, hidden: Tensor, size: number) {
  const lh = size / 8;
  const u = c.unet.io;
  const sample = normal(2 * 4 * lh * lh, 7);
  const latent = normal(4 * lh * lh, 8);
  const vaeIn = (io: Components["vae"]["io"]) =>
    floatTensor(io.inputs.latent_sample.dtype, latent, [1, 4, lh, lh]);
  return {
    unet: {
      [u.inputs.sample.name]: floatTensor(u.inputs.sample.dtype, sample, [2, 4, lh, lh]),
      [u.timestep!.name]: timestepTensor(u.timestep!, 500, 2),
      [u.inputs.encoder_hidden_states.name]: castFloatTensor(
        hidden,
        u.inputs.encoder_hidden_states.dtype,
      ),
    } as Feeds,
    vae: { [c.vae.io.inputs.latent_sample.name]: vaeIn(c.vae.io) } as Feeds,
    tiny: c.tiny ? { [c.tiny.io.inputs.latent_sample.name]: vaeIn(c.tiny.io) } as Feeds : null,
  };
}

const PROMPT = "a lighthouse on a cliff at sunset, detailed, dramatic sky";

/** The request every image run makes. */
function request(size: number) {
  return {
    mode: "text_to_image" as const,
    positive: PROMPT,
    negative: "blurry, low quality",
    width: size,
    height: size,
    seed: 42,
  };
}

/** Runs the measurement; returns the report. */
export async function runGpuBench(args: string[]): Promise<GpuReport> {
  const { values: v } = parseArgs({
    args,
    options: {
      provider: { type: "string", default: "webgpu" },
      full: { type: "boolean", default: false },
      root: { type: "string" },
      set: { type: "string" },
      size: { type: "string" },
      steps: { type: "string", default: "25" },
      runs: { type: "string", default: "5" },
      "agreement-steps": { type: "string", default: "4" },
      reference: { type: "string", default: "cpu" },
      torch: { type: "string" },
      "torch-device": { type: "string" },
      out: { type: "string", default: join(REPO, ".cache/bench/gpu.json") },
    },
  });
  const provider = v.provider as ExecutionProvider;
  if (!["webgpu", "cuda", "cpu"].includes(provider)) {
    throw new Error(`--provider must be webgpu, cuda or cpu, got ${v.provider}`);
  }
  const tiny = !v.full && !v.root;
  const size = Number(v.size ?? (tiny ? 64 : 512));
  const runs = Number(v.runs);
  const steps = Number(v.steps);
  const agreementSteps = Number(v["agreement-steps"]);
  const say = (text: string) => console.error(`[bench:gpu] ${text}`);

  const memory = sampleGpuMemory();
  const c0 = performance.now();
  const check = await checkExecutionProvider(provider);
  const providerMs = performance.now() - c0;
  say(`provider ${provider} ready in ${providerMs.toFixed(0)} ms (float16: ${check.float16})`);

  // The fp16 set where the device computes in float16, else the fp32 one.
  const precision = check.float16 ? "fp16" : "fp32";
  let root: string;
  if (v.root) root = v.root;
  else if (v.full) {
    say(`building (or reusing) the full-size ${precision} set`);
    root = (await buildFullSet({ precision })).root;
  } else root = TINY_ROOT;
  const folder = v.set ?? (tiny ? (precision === "fp16" ? "sd15-fp16" : "sd15") : "sd15");

  // Components on the provider, CPU I/O.
  // The inputs, made once on the CPU provider: the hidden states are its text encoder's.
  const cpuModels = await openComponents(root, folder, "cpu");
  const tokenizer = await ClipTokenizer.load(join(root, folder, "tokenizer"));
  const hiddenOut = cpuModels.textEncoder.io.outputs.last_hidden_state.name;
  const textFeed = textFeeds(cpuModels, tokenizer);
  const hidden = (await cpuModels.textEncoder.session.run(textFeed, [hiddenOut]))[hiddenOut];
  const feedsCpu = componentFeeds(cpuModels, hidden, size);
  const outName = cpuModels.unet.io.outputs.out_sample.name;
  let reference: Float32Array | undefined;
  let cpuUnetMs = NaN;
  if (v.reference === "cpu") {
    const t0 = performance.now();
    reference = Float32Array.from(
      toFloat32((await cpuModels.unet.session.run(feedsCpu.unet, [outName]))[outName]),
    );
    cpuUnetMs = performance.now() - t0;
  }
  await cpuModels.release();

  // Components on the provider, CPU I/O.
  const c = await openComponents(root, folder, provider);
  const feeds = componentFeeds(c, hidden, size);
  const run = (s: Session, f: Feeds) => () => s.run(f);
  say("timing the components");
  const textEncoderBatch2 = await timed(runs, 1, run(c.textEncoder.session, textFeed));
  const unetStepBatch2 = await timed(runs, 1, run(c.unet.session, feeds.unet));
  const predicted = Float32Array.from(
    toFloat32((await c.unet.session.run(feeds.unet, [outName]))[outName]),
  );
  const vaeDecodeFull = await timed(runs, 1, run(c.vae.session, feeds.vae));
  const vaeDecodeTiny = c.tiny ? await timed(runs, 1, run(c.tiny.session, feeds.tiny!)) : null;
  const unetDtype = c.unet.io.inputs.sample.dtype as "float32" | "float16";
  await c.release();
  const lh = size / 8;
  const trip = await createSessionFromBytes(roundTripModel(unetDtype), [], {
    executionProvider: provider,
    label: "latent round trip",
  });
  const x = floatTensor(unetDtype, normal(2 * 4 * lh * lh, 9), [2, 4, lh, lh]);
  const latentRoundTrip = {
    ...await timed(Math.max(runs, 20), 3, () => trip.run({ x })),
    bytesEachWay: 2 * 4 * lh * lh * (unetDtype === "float16" ? 2 : 4),
  };
  await trip.release();

  let torchReport: GpuReport["torch"];
  if (v.torch) {
    say(`the same UNet step in PyTorch (${v.torch})`);
    torchReport = await torchUnet(
      v.torch,
      v["torch-device"],
      join(root, folder, "unet/model.onnx"),
      {
        feeds: feedsCpu.unet,
        runs,
        reference,
        predicted,
      },
    );
  }

  say("whole images through the engine");
  const l0 = performance.now();
  const engine = await createEngine(engineConfig(root, folder, provider, DEFAULT_PRESET));
  const loadMs = performance.now() - l0;
  const image = async (settings: GenerationSettings) => {
    const t0 = performance.now();
    const result = await engine.generate(request(size), { settings });
    return { ms: performance.now() - t0, data: result.image.data };
  };
  await image({ ...DEFAULT_PRESET, steps: 2 }); // warm-up: shaders, allocations
  const defaultMs = [(await image({ ...DEFAULT_PRESET, steps })).ms];
  const fastMs = [(await image(FAST_PRESET)).ms, (await image(FAST_PRESET)).ms];
  const short = await image({ ...DEFAULT_PRESET, steps: agreementSteps });
  await engine.release();
  const gpuMemory = await memory.stop();

  const report: GpuReport = {
    options: { ...v, provider, size, steps, runs, tiny, folder },
    machine: {
      gpu: await probeTool(
        "nvidia-smi",
        ["--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
        /./,
      ),
      vulkan: await probeTool("vulkaninfo", ["--summary"], /deviceName|driverInfo/),
      cpus: navigator.hardwareConcurrency,
    },
    provider: { ...check, ms: providerMs },
    set: { root, folder, unetDtype },
    components: {
      textEncoderBatch2,
      unetStepBatch2,
      vaeDecodeFull,
      vaeDecodeTiny,
      latentRoundTrip,
    },
    images: {
      loadMs,
      defaultPreset: { steps, totalMs: defaultMs },
      fastPreset: { steps: FAST_PRESET.steps, totalMs: fastMs },
    },
    gpuMemory,
  };
  if (torchReport) report.torch = torchReport;

  if (reference) {
    say(`the CPU provider's image (${agreementSteps} steps) for the agreement`);
    const cpu = await createEngine(engineConfig(root, folder, "cpu", DEFAULT_PRESET));
    const cpuImage = await cpu.generate(request(size), {
      settings: { ...DEFAULT_PRESET, steps: agreementSteps },
    });
    await cpu.release();
    report.agreement = {
      noisePrediction: agreement(reference, predicted),
      image: { ...imageAgreement(cpuImage.image.data, short.data), steps: agreementSteps },
      cpuUnetStepBatch2Ms: cpuUnetMs,
    };
  }
  await Deno.mkdir(dirname(report.options.out as string), { recursive: true });
  await Deno.writeTextFile(report.options.out as string, JSON.stringify(report, null, 2));
  say(summary(report));
  return report;
}

/**
 * Runs `torch_onnx.py` with `python` on the exported UNet and its feeds; the
 * export lives in a temporary folder, removed afterwards.
 */
async function torchUnet(
  python: string,
  device: string | undefined,
  unetPath: string,
  run: { feeds: Feeds; runs: number; reference?: Float32Array; predicted: Float32Array },
): Promise<NonNullable<GpuReport["torch"]>> {
  const dir = await Deno.makeTempDir({ prefix: "sd15-torch-" });
  try {
    const graph = await exportForTorch(unetPath, run.feeds, dir);
    const result = join(dir, "result.json");
    const script = fileURLToPath(new URL("./torch_onnx.py", import.meta.url));
    const args = [script, graph, "--runs", String(run.runs), "--out", result];
    if (device) args.push("--device", device);
    const out = await new Deno.Command(python, { args, stdout: "inherit", stderr: "piped" })
      .output();
    if (!out.success) {
      throw new Error(`${python} torch_onnx.py failed: ${new TextDecoder().decode(out.stderr)}`);
    }
    const r = JSON.parse(await Deno.readTextFile(result));
    const file = r.outputs[Object.keys(r.outputs)[0]].file as string;
    const bytes = await Deno.readFile(file);
    const values = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
    return {
      device: r.device,
      version: r.torch,
      dtype: r.dtype,
      unetStepBatch2: stats(r.ms),
      peakMiB: r.peak_mib,
      ...(run.reference ? { vsCpu: agreement(run.reference, values) } : {}),
      vsProvider: agreement(run.predicted, values),
    };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** The report as a few readable lines. */
export function summary(r: GpuReport): string {
  const ms = (s: Stats | null) => (s ? `${s.median.toFixed(1)} ms` : "n/a");
  const c = r.components;
  const lines = [
    `${r.provider.provider} on ${r.machine.gpu ?? r.machine.vulkan ?? "unknown device"}, ` +
    `${r.set.folder} (${r.set.unetDtype}), ${r.options.size}px`,
    `text encoder (batch 2) ${ms(c.textEncoderBatch2)}; UNet step (batch 2) ${
      ms(c.unetStepBatch2)
    }; ` +
    `VAE decode ${ms(c.vaeDecodeFull)} (tiny ${ms(c.vaeDecodeTiny)}); latents through the CPU ` +
    `${ms(c.latentRoundTrip)} for ${c.latentRoundTrip.bytesEachWay} bytes each way`,
    `engine load ${r.images.loadMs.toFixed(0)} ms; default ${r.images.defaultPreset.steps} steps ` +
    `${r.images.defaultPreset.totalMs.map((x) => x.toFixed(0)).join(", ")} ms; fast ` +
    `${r.images.fastPreset.totalMs.map((x) => x.toFixed(0)).join(", ")} ms`,
    "peakMiB" in r.gpuMemory
      ? `GPU memory: ${r.gpuMemory.peakMiB} MiB above ${r.gpuMemory.baselineMiB} MiB`
      : `GPU memory: ${r.gpuMemory.unavailable}`,
  ];
  if (r.torch) {
    const t = r.torch;
    lines.push(
      `torch ${t.version} on ${t.device} (${t.dtype}): UNet step (batch 2) ` +
        `${ms(t.unetStepBatch2)}; vs ${r.provider.provider} max rel ` +
        `${t.vsProvider.maxRel.toExponential(2)}` +
        (t.peakMiB === null ? "" : `; peak ${t.peakMiB.toFixed(0)} MiB`),
    );
  }
  if (r.agreement) {
    const a = r.agreement;
    lines.push(
      `vs CPU: noise prediction max abs ${a.noisePrediction.maxAbs.toExponential(2)}, ` +
        `max rel ${a.noisePrediction.maxRel.toExponential(2)}; image (${a.image.steps} steps) ` +
        `PSNR ${a.image.psnrDb.toFixed(1)} dB, max diff ${a.image.maxDiff}; CPU UNet step ` +
        `${a.cpuUnetStepBatch2Ms.toFixed(1)} ms`,
    );
  }
  return lines.join("\n");
}

/** `deno task bench:gpu --help`. */
const HELP: Help = {
  usage: [
    "deno task bench:gpu [--provider webgpu|cuda|cpu] [--full | --root DIR] [--set NAME]",
    "  [--size N] [--steps N] [--runs N] [--agreement-steps N] [--reference cpu|none]",
    "  [--torch PYTHON [--torch-device cuda|cpu]] [--out FILE]",
  ],
  summary: "Measures one execution provider on one model set: provider start-up, the text " +
    "encoder, a UNet step at batch 2, both VAE decoders, the latents' trip through the CPU, " +
    "a 25-step default image and a fast-preset image, peak GPU memory (nvidia-smi), and " +
    'agreement with the CPU provider (docs/gpu.md, "Measuring a GPU"). Without --full or ' +
    "--root it runs on the test-sized models: seconds, for checking the script, not speed.",
  options: [
    ["--provider NAME", "execution provider to measure: webgpu (default), cuda or cpu"],
    ["--full", "build (or reuse) the full-size random-weight set outside the repository first"],
    ["--root DIR", "models root holding the set to measure, instead of --full or the tiny set"],
    ["--set NAME", "model folder under the root (default sd15, or the tiny set's fp16/fp32 one)"],
    ["--size N", "image side in pixels (default 512, or 64 on the tiny set)"],
    ["--steps N", "steps of the default-preset image (default 25)"],
    ["--runs N", "timed runs per component; the median is reported (default 5)"],
    ["--agreement-steps N", "steps of the image compared with the CPU provider (default 4)"],
    ["--reference cpu|none", "compare with the CPU provider (default), or skip the comparison"],
    ["--torch PYTHON", "also run the same UNet in PyTorch with this Python (torch and numpy)"],
    ["--torch-device DEV", "PyTorch's device when it has no CUDA: cuda or cpu"],
    ["--out FILE", "where the JSON report goes (default .cache/bench/gpu.json)"],
    ["-h, --help", "print this help and exit"],
  ],
  notes: ["The JSON report also goes to stdout; a summary goes to stderr."],
};

if (import.meta.main) {
  if (wantsHelp(Deno.args)) Deno.exit(printHelp(HELP));
  const report = await runGpuBench(Deno.args);
  console.log(JSON.stringify(report));
}
