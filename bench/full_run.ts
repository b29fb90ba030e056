/**
 * One measured scenario of `deno task bench --full`, in its own process so
 * that its peak RSS (`VmHWM`) is its own: opens the engine in-process on a
 * full-size set with the given session options, runs warm-up + measured
 * generations, times every `session.run` by model, the tokenizer, the
 * scheduler, PNG encoding and base64, and prints one JSON line on stdout.
 *
 * ```sh
 * deno run -P=test bench/full_run.ts --root DIR [--base sd15] [--steps 25] [--preset default|fast]
 *   [--vae full|tiny] [--arena on|off] [--pattern on|off] [--size 512] [--runs 1] [--lora PATH]
 *   [--guided depth --annotator PATH] [--syntax plain|a1111] [--chunks K]
 * ```
 *
 * `--preset turbo` samples as the turbo preset does (tcd, 1 step, eta 1, no
 * CFG) on the plain UNet: the merged Hyper-SD LoRA costs nothing per step.
 * `--chunks K` (with `--syntax a1111`, the engine's `[prompt] syntax`) makes
 * the positive prompt K of AUTOMATIC1111's 75-token chunks long
 * ({@link chunkedPrompt}): K chunks through the text encoder (one run, batch K: the
 * engine encodes every chunk in one batch) and a UNet cross-attention over
 * 77·K positions.
 *
 * `--guided depth` runs guided generation with the set's full-size depth
 * ControlNet and residual UNet (`buildFullExtras`); the depth annotator is
 * `--annotator` (the test-sized one: its cost is not part of what is measured).
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { parseArgs } from "node:util";
import { join } from "node:path";
import { decodeImageInput, encodePng, toRgbImage } from "../mod/image/mod.ts";
import { createSession, type Feeds, type Tensor } from "../mod/onnx/mod.ts";
import { createEngine, type EngineConfig, type ModelSession } from "../mod/pipeline/mod.ts";
import { TorchGenerator } from "../mod/random/mod.ts";
import { createScheduler } from "../mod/schedulers/mod.ts";
import { ClipTokenizer } from "../mod/tokenizer/mod.ts";
import { procMemory } from "./proc_memory.ts";

/** What one scenario reports. */
export interface RunReport {
  /** The options it ran with. */
  options: Record<string, unknown>;
  /** Engine creation (all sessions, LoRA merge): ms. */
  loadMs: number;
  /** RSS right after the engine was created, bytes. */
  rssAfterLoad: number;
  /** Peak RSS of the process (VmHWM), bytes. */
  peakRss: number;
  /** RSS after the last generation, bytes. */
  rssAfterRuns: number;
  /** Per measured generation: end-to-end ms and Σ session.run ms. */
  generations: Array<{ totalMs: number; sessionMs: number }>;
  /** session.run durations by model label, ms (measured generations only). */
  runs: Record<string, number[]>;
  /** Other stages, ms samples. */
  stages: Record<string, number[]>;
}

/** `session` with every run timed into `runs[label]` while `active.on`, summed into `active.sum`. */
export function timedSession(
  session: ModelSession,
  label: string,
  runs: Record<string, number[]>,
  active: { on: boolean; sum: number },
): ModelSession {
  return {
    inputs: session.inputs,
    outputs: session.outputs,
    async run(feeds: Feeds, names?: readonly string[]): Promise<Record<string, Tensor>> {
      const t0 = performance.now();
      const out = await session.run(feeds, names);
      const ms = performance.now() - t0;
      if (active.on) {
        (runs[label] ??= []).push(ms);
        active.sum += ms;
      }
      return out;
    },
    release: () => session.release(),
  };
}

/**
 * A prompt that AUTOMATIC1111's reading splits into exactly `k` chunks: `k`
 * descriptive passages of 60-odd words (under 75 tokens each, so no comma
 * back-off moves words) joined by `BREAK`, as a long agent-written prompt
 * with sections would be. `k = 1` is the first passage alone.
 */
export function chunkedPrompt(k: number): string {
  const passages = [
    "a lighthouse on a cliff at sunset, dramatic sky with towering clouds lit orange and " +
    "purple, waves crashing against dark rocks below, spray catching the light, a narrow path " +
    "winding up the grassy slope, seabirds circling the lamp room, detailed, sharp focus",
    "oil painting in the style of a nineteenth century romantic landscape, thick impasto " +
    "brushstrokes, warm glazes over a cool underpainting, golden hour light raking across the " +
    "scene, deep shadows in the crevices of the cliff, a small boat on the horizon",
    "wide angle composition with the lighthouse on the right third, leading lines from the " +
    "path and the shoreline, atmospheric perspective fading the distant headlands into haze, " +
    "high dynamic range, rich colour, cinematic mood, masterpiece, best quality",
    "foreground of wild flowers and tall grass bending in the wind, weathered wooden fence " +
    "posts, a stone cottage with smoke rising from its chimney, lanterns glowing in its " +
    "windows, the first stars appearing in the darkening eastern sky",
  ];
  if (!Number.isInteger(k) || k < 1 || k > passages.length) {
    throw new Error(`--chunks: 1 to ${passages.length}, got ${k}`);
  }
  return passages.slice(0, k).join(" BREAK ");
}

function timingOpener(runs: Record<string, number[]>, active: { on: boolean; sum: number }) {
  return async (path: string, options: Parameters<typeof createSession>[1]) =>
    timedSession(await createSession(path, options), options?.label ?? path, runs, active);
}

async function main(): Promise<void> {
  const { values: v } = parseArgs({
    args: Deno.args,
    options: {
      root: { type: "string" },
      base: { type: "string", default: "sd15" },
      steps: { type: "string", default: "25" },
      preset: { type: "string", default: "default" },
      vae: { type: "string", default: "full" },
      arena: { type: "string", default: "off" },
      pattern: { type: "string", default: "on" },
      size: { type: "string", default: "512" },
      runs: { type: "string", default: "1" },
      warmup: { type: "string", default: "0" },
      lora: { type: "string" },
      guided: { type: "string" },
      annotator: { type: "string" },
      syntax: { type: "string", default: "plain" },
      chunks: { type: "string" },
    },
  });
  const guided = v.guided === "depth";
  const root = v.root!;
  const size = Number(v.size);
  const turbo = v.preset === "turbo";
  const fast = v.preset === "fast" || turbo;
  const steps = turbo ? 1 : v.preset === "fast" ? 4 : Number(v.steps);
  const scheduler = turbo ? "tcd" : fast ? "lcm" : "pndm";
  const config: EngineConfig = {
    models: {
      base: join(root, v.base!),
      controlnetUnet: join(root, "sd15", "controlnet_unet", "model.onnx"),
      vaeDecoder: v.vae === "tiny" ? "tiny" : "full",
      tinyVaeDecoder: join(root, "taesd", "vae_decoder", "model.onnx"),
    },
    runtime: {
      executionProvider: "cpu",
      intraOpThreads: 0,
      interOpThreads: 0,
      graphOptimization: "all",
      cpuMemArena: v.arena === "on",
      memoryPattern: v.pattern === "on",
      imageSessions: { cpuMemArena: v.arena === "on", memoryPattern: v.pattern === "on" },
      executionMode: "sequential",
      // Every in-process scenario optimises at its start, as they were measured before the cache.
      optimizedCache: null,
      warmUp: false,
    },
    generation: {
      steps,
      guidanceScale: turbo ? 0 : fast ? 1 : 7.5,
      scheduler,
      timestepSpacing: undefined,
      karras: false,
      eta: turbo ? 1 : 0,
    },
    controlnet: {
      depth: {
        enabled: guided,
        model: guided ? join(root, "controlnet", "depth.onnx") : "",
        preprocessor: guided ? v.annotator ?? "" : "",
        preprocessorInput: "unit",
        conditioningScale: 1,
      },
      openpose: { enabled: false, model: "", detector: "", estimator: "", conditioningScale: 1 },
      inpaint: { enabled: false, model: "", conditioningScale: 0.5 },
    },
    lora: { files: v.lora ? [{ path: v.lora, weight: 1 }] : [] },
    prompt: { syntax: v.syntax === "a1111" ? "a1111" : "plain", clipSkip: 1 },
  };
  const runs: Record<string, number[]> = {};
  const active = { on: false, sum: 0 };
  const t0 = performance.now();
  const engine = await createEngine(config, { openSession: timingOpener(runs, active) });
  const loadMs = performance.now() - t0;
  const rssAfterLoad = procMemory().rss;
  const base = {
    positive: v.chunks
      ? chunkedPrompt(Number(v.chunks))
      : "a lighthouse on a cliff at sunset, detailed, dramatic sky",
    negative: "blurry, low quality",
    width: size,
    height: size,
    seed: 42,
  };
  // A control picture: a lit sphere on a gradient, so the depth annotator sees structure.
  const picture = {
    width: size,
    height: size,
    data: Uint8Array.from({ length: size * size * 3 }, (_, i) => {
      const p = Math.floor(i / 3);
      const x = p % size - size / 2;
      const y = Math.floor(p / size) - size / 2;
      return x * x + y * y < (size / 3) ** 2 ? 220 - (x + y) / 8 : (p % size) * 255 / size;
    }),
  };
  const request = guided
    ? { ...base, mode: "guided_image" as const, controlMode: "depth" as const, image: picture }
    : { ...base, mode: "text_to_image" as const };
  const stages: Record<string, number[]> = {};
  const time = async <T>(name: string, fn: () => Promise<T> | T): Promise<T> => {
    const s = performance.now();
    const out = await fn();
    (stages[name] ??= []).push(performance.now() - s);
    return out;
  };
  const generations: RunReport["generations"] = [];
  let image;
  for (let i = 0; i < Number(v.warmup); i++) await engine.generate(request);
  for (let i = 0; i < Number(v.runs); i++) {
    active.on = true;
    active.sum = 0;
    const s = performance.now();
    image = (await engine.generate(request)).image;
    generations.push({ totalMs: performance.now() - s, sessionMs: active.sum });
    active.on = false;
  }
  const rssAfterRuns = procMemory().rss;
  await engine.release();

  // Stages outside session.run, measured on their own (20 samples each).
  const tokenizer = await ClipTokenizer.load(join(root, v.base!, "tokenizer"));
  const schedulerConfig = JSON.parse(
    await Deno.readTextFile(join(root, v.base!, "scheduler", "scheduler_config.json")),
  );
  const latent = new Float32Array(4 * (size / 8) ** 2).map((_, i) => Math.sin(i));
  for (let k = 0; k < 20; k++) {
    await time("tokenize", () => {
      tokenizer.encode(request.positive);
      tokenizer.encode(request.negative);
    });
    await time("scheduler (whole run)", () => {
      const s = createScheduler(scheduler, schedulerConfig, {});
      s.setTimesteps(steps);
      const g = new TorchGenerator(1);
      let x: Float32Array = latent;
      for (const t of Array.from(s.timesteps as ArrayLike<number>)) {
        x = Float32Array.from(s.step(latent, t, s.scaleModelInput(x, t), g).prevSample);
      }
    });
  }
  for (let k = 0; k < 5; k++) {
    const png = await time("PNG encode", () => encodePng(image!, { prompt: request.positive }));
    const b64 = await time("base64", () => Buffer.from(png).toString("base64"));
    // A user image at another size: decode + Lanczos resize to the generation size.
    const pixels = Uint8Array.from({ length: 640 * 480 * 3 }, (_, i) => (i * 7) & 255);
    const input = await encodePng({ width: 640, height: 480, data: pixels }, {});
    const field = Buffer.from(input).toString("base64");
    await time(
      "input decode + resize",
      async () => await toRgbImage(await decodeImageInput("input_image", field), size, size),
    );
    void b64;
  }
  const report: RunReport = {
    options: { ...v, steps },
    loadMs,
    rssAfterLoad,
    peakRss: procMemory().peak,
    rssAfterRuns,
    generations,
    runs,
    stages,
  };
  console.log(JSON.stringify(report));
}

if (import.meta.main) await main();
