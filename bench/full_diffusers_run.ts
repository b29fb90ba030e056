/**
 * The project's side of `full_diffusers.ts`, in its own process: the engine
 * on a full-size set with one LoRA merged at load (`mod/lora`, as the merge
 * cache merges it), the given scheduler, steps, η and guidance, TAESD or the
 * full VAE; for each run it writes the image (uint8 RGB) and the latents the
 * VAE decoder was fed, and prints one JSON line.
 *
 * ```sh
 * deno run -P=test bench/full_diffusers_run.ts --root DIR --base sd15-fp32 --out DIR
 *   --prompt TEXT --seed 42 --size 512 [--lora PATH] [--vae tiny|full] [--vae-set DIR]
 *   --run NAME:SCHEDULER:STEPS:ETA:GUIDANCE [--run …]
 *   [--syntax plain|a1111] [--clip-skip N] [--embedding PATH] [--prompt-of NAME=TEXT …]
 * ```
 *
 * `--syntax`, `--clip-skip` and `--embedding` are the engine's `[prompt]`
 * (default: plain, 1, none; the embedding's word is its file's stem);
 * `--prompt-of` gives a run its own prompt. `--base` is a folder under `--root`;
 * `--vae-set` an absolute VAE set folder (`[models] vae`: it decodes with
 * `--vae full`). Each run also writes what the
 * UNet's first call was conditioned on (`NAME.embeds`, float32).
 *
 * @module
 */

import { join } from "node:path";
import { parseArgs } from "node:util";
import { createSession, type Feeds, type Tensor, toFloat32 } from "../mod/onnx/mod.ts";
import { createEngine, type EngineConfig, type ModelSession } from "../mod/pipeline/mod.ts";
import { embeddingStem } from "../mod/prompt/mod.ts";
import type { SchedulerName } from "../mod/schedulers/mod.ts";

/** One generation to make: its name and sampling. */
export interface DiffusersRun {
  /** File stem of its outputs. */
  name: string;
  scheduler: SchedulerName;
  steps: number;
  eta: number;
  guidanceScale: number;
}

/** `NAME:SCHEDULER:STEPS:ETA:GUIDANCE` → a run. */
export function parseRun(text: string): DiffusersRun {
  const [name, scheduler, steps, eta, guidance] = text.split(":");
  if (!name || !scheduler || [steps, eta, guidance].some((x) => !Number.isFinite(Number(x)))) {
    throw new Error(`--run must be NAME:SCHEDULER:STEPS:ETA:GUIDANCE, got ${JSON.stringify(text)}`);
  }
  return {
    name,
    scheduler: scheduler as SchedulerName,
    steps: Number(steps),
    eta: Number(eta),
    guidanceScale: Number(guidance),
  };
}

async function main(): Promise<void> {
  const { values: v } = parseArgs({
    args: Deno.args,
    options: {
      root: { type: "string" },
      base: { type: "string", default: "sd15-fp32" },
      out: { type: "string" },
      prompt: { type: "string" },
      seed: { type: "string", default: "42" },
      size: { type: "string", default: "512" },
      lora: { type: "string" },
      vae: { type: "string", default: "tiny" },
      "vae-set": { type: "string" },
      run: { type: "string", multiple: true },
      syntax: { type: "string", default: "plain" },
      "clip-skip": { type: "string", default: "1" },
      embedding: { type: "string" },
      "prompt-of": { type: "string", multiple: true },
    },
  });
  const root = v.root!;
  const runs = (v.run ?? []).map(parseRun);
  const size = Number(v.size);
  const first = runs[0];
  const config: EngineConfig = {
    models: {
      base: join(root, v.base!),
      controlnetUnet: join(root, v.base!, "controlnet_unet", "model.onnx"),
      vaeDecoder: v.vae === "full" ? "full" : "tiny",
      tinyVaeDecoder: join(root, "taesd", "vae_decoder", "model.onnx"),
      ...(v["vae-set"] ? { vae: v["vae-set"] } : {}),
    },
    runtime: {
      executionProvider: "cpu",
      intraOpThreads: 0,
      interOpThreads: 0,
      graphOptimization: "all",
      cpuMemArena: false,
      memoryPattern: true,
      imageSessions: { cpuMemArena: false, memoryPattern: true },
      executionMode: "sequential",
      // Each comparison image is made once from fresh sessions: no cache, no warm-up.
      optimizedCache: null,
      warmUp: false,
    },
    generation: {
      steps: first.steps,
      guidanceScale: first.guidanceScale,
      scheduler: first.scheduler,
      timestepSpacing: undefined,
      karras: false,
      eta: first.eta,
    },
    controlnet: {
      depth: {
        enabled: false,
        model: "",
        preprocessor: "",
        preprocessorInput: "unit",
        conditioningScale: 1,
      },
      openpose: { enabled: false, model: "", detector: "", estimator: "", conditioningScale: 1 },
      inpaint: { enabled: false, model: "", conditioningScale: 0.5 },
    },
    lora: { files: v.lora ? [{ path: v.lora, weight: 1 }] : [] },
    prompt: {
      syntax: v.syntax === "a1111" ? "a1111" : "plain",
      clipSkip: Number(v["clip-skip"]),
      embeddingFiles: v.embedding ? [{ path: v.embedding, name: embeddingStem(v.embedding) }] : [],
    },
  };
  const prompts = new Map(
    (v["prompt-of"] ?? []).map((p) => [p.slice(0, p.indexOf("=")), p.slice(p.indexOf("=") + 1)]),
  );
  // The decoder's input is the latents the engine decodes: keep the last one; and what the
  // UNet's first call of a run is conditioned on.
  let decoded: Float32Array | undefined;
  const seen: { conditioned?: Float32Array } = {};
  const openSession = async (path: string, options: Parameters<typeof createSession>[1]) => {
    const session = await createSession(path, options);
    const decoder = /vae_decoder/.test(path);
    if (!decoder && !/unet/.test(path)) return session;
    const wrapped: ModelSession = {
      inputs: session.inputs,
      outputs: session.outputs,
      async run(feeds: Feeds, names?: readonly string[]): Promise<Record<string, Tensor>> {
        if (decoder) decoded = Float32Array.from(toFloat32(Object.values(feeds)[0]));
        else if (!seen.conditioned && feeds.encoder_hidden_states) {
          seen.conditioned = Float32Array.from(toFloat32(feeds.encoder_hidden_states));
        }
        return await session.run(feeds, names);
      },
      release: () => session.release(),
    };
    return wrapped;
  };
  const t0 = performance.now();
  const engine = await createEngine(config, { openSession });
  const loadMs = performance.now() - t0;
  const report: Record<string, unknown> = { loadMs, runs: {} };
  for (const run of runs) {
    seen.conditioned = undefined;
    const s = performance.now();
    const { image } = await engine.generate(
      {
        mode: "text_to_image",
        positive: prompts.get(run.name) ?? v.prompt!,
        negative: "",
        width: size,
        height: size,
        seed: Number(v.seed),
      },
      {
        settings: {
          steps: run.steps,
          scheduler: run.scheduler,
          eta: run.eta,
          guidanceScale: run.guidanceScale,
        },
      },
    );
    const ms = performance.now() - s;
    await Deno.writeFile(join(v.out!, `${run.name}.rgb`), image.data);
    await Deno.writeFile(
      join(v.out!, `${run.name}.latents`),
      new Uint8Array(decoded!.buffer, decoded!.byteOffset, decoded!.byteLength),
    );
    const c = seen.conditioned as Float32Array | undefined; // set by the UNet wrapper
    if (c) {
      await Deno.writeFile(
        join(v.out!, `${run.name}.embeds`),
        new Uint8Array(c.buffer, c.byteOffset, c.byteLength),
      );
    }
    (report.runs as Record<string, unknown>)[run.name] = { ...run, ms };
  }
  await engine.release();
  console.log(JSON.stringify(report));
}

if (import.meta.main) await main();
