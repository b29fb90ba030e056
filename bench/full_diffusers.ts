/**
 * The full-size check of the few-step presets against diffusers itself (not
 * a test: it needs a diffusers export, two diffusers checkouts and ~6 GB per
 * side, and takes minutes). On the random-weight SD 1.5 that
 * `diffusers_export.py` exports (diffusers v0.25.0's script), with LoRAs of
 * the published layouts built here (a Hyper-SD-shaped one for turbo: kohya
 * keys, float32; an LCM-shaped one for fast) and a TAESD decoder, it makes
 * the same images twice from the same prompt ids and seed:
 *
 * - diffusers: `StableDiffusionPipeline` with the LoRA loaded and fused by
 *   `load_lora_weights` / `fuse_lora`, `TCDScheduler` (or `LCMScheduler`) from
 *   SD 1.5's scheduler config, `AutoencoderTiny` with the TAESD weights
 *   (`diffusers_pipeline.py`);
 * - the project: the engine on the export with the same LoRA merged by
 *   `mod/lora` at load, the same scheduler, steps, η and guidance, the TAESD
 *   decoder converted by `mod/convert` (`full_diffusers_run.ts`);
 *
 * and reports, per run, the largest difference in grey levels, the mean,
 * PSNR, and the largest difference of the latents the VAE decoded; also how
 * far the LoRA moves diffusers' own 1-step image (so a merge that dropped it
 * would show). docs/performance.md ("Few-step presets against diffusers")
 * has the method and the figures.
 *
 * ```sh
 * deno task bench --diffusers-check --export DIR \
 *   --diffusers SRC_0_25_0 --tcd SRC_0_27_2 [--runs turbo-1,turbo-2,fast-4] [--eta 1] \
 *   [--seed 42] [--python /usr/bin/python3] [--out .cache/bench/diffusers.json]
 * ```
 *
 * @module
 */

import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { taesdDecoderToOnnx } from "../mod/convert/mod.ts";
import { randomTaesdWeights, taesdSafetensors } from "../mod/convert/taesd_testing.ts";
import {
  buildFullUnet,
  buildHyperSdLora,
  buildTinyLora,
  lcmLoraModules,
} from "../tests/fixtures/builder/mod.ts";
import { ClipTokenizer, writeClipTokenizerFiles } from "../mod/tokenizer/mod.ts";
import { benchCacheDir } from "./full_models.ts";
import type { DiffusersRun } from "./full_diffusers_run.ts";
import { sampleRss } from "./proc_memory.ts";
import { SD15_CONFIG } from "../mod/schedulers/testdata/reference.ts";

const REPO = fileURLToPath(new URL("../", import.meta.url));

/** The preset runs by name: `turbo-N` (tcd, N steps, guidance 0), `fast-N` (lcm, guidance 1). */
export function presetRun(name: string, eta: number): DiffusersRun & { lora: "turbo" | "fast" } {
  const m = /^(turbo|fast)-(\d+)$/.exec(name);
  if (!m) throw new Error(`--runs: expected turbo-N or fast-N, got ${JSON.stringify(name)}`);
  const turbo = m[1] === "turbo";
  return {
    name,
    scheduler: turbo ? "tcd" : "lcm",
    steps: Number(m[2]),
    eta: turbo ? eta : 0,
    guidanceScale: turbo ? 0 : 1,
    lora: turbo ? "turbo" : "fast",
  };
}

/** How two uint8 images differ: the largest and mean absolute difference and PSNR (dB). */
export function compareImages(a: Uint8Array, b: Uint8Array): {
  maxDiff: number;
  meanDiff: number;
  psnrDb: number;
  differing: number;
} {
  if (a.length !== b.length) throw new Error(`images differ in size: ${a.length} vs ${b.length}`);
  let max = 0, sum = 0, sq = 0, differing = 0;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i] - b[i]);
    if (d > max) max = d;
    if (d) differing++;
    sum += d;
    sq += d * d;
  }
  const mse = sq / a.length;
  return {
    maxDiff: max,
    meanDiff: sum / a.length,
    psnrDb: mse === 0 ? Infinity : 10 * Math.log10((255 * 255) / mse),
    differing: differing / a.length,
  };
}

/** Largest absolute difference of two float32 arrays, and the largest |value| of the first. */
export function compareLatents(
  a: Float32Array,
  b: Float32Array,
): { maxAbs: number; scale: number } {
  let maxAbs = 0, scale = 0;
  for (let i = 0; i < a.length; i++) {
    maxAbs = Math.max(maxAbs, Math.abs(a[i] - b[i]));
    scale = Math.max(scale, Math.abs(a[i]));
  }
  return { maxAbs, scale };
}

/** The bytes of a little-endian float32 file as floats. */
export const f32 = (bytes: Uint8Array) =>
  new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);

/** Runs `cmd` from the repository with its RSS sampled; throws with its stderr's tail when it fails. */
export async function runSampled(
  cmd: string,
  args: string[],
  what: string,
): Promise<{ stdout: string; peakRss: number }> {
  const child = new Deno.Command(cmd, { args, cwd: REPO, stdout: "piped", stderr: "piped" })
    .spawn();
  const sampler = sampleRss(child.pid);
  const out = await child.output();
  const peakRss = await sampler.stop();
  const stdout = new TextDecoder().decode(out.stdout);
  if (out.code !== 0) {
    const err = new TextDecoder().decode(out.stderr).trim().split("\n").slice(-8).join("\n");
    throw new Error(`${what} failed (exit ${out.code}):\n${err}`);
  }
  return { stdout, peakRss };
}

/**
 * Lays the diffusers-script export out as a models root under `work/models`
 * (hard links, the project's tokenizer files, SD 1.5's scheduler config) with
 * a random-weight TAESD decoder in the published file's layout
 * (`work/taesd_decoder.safetensors`, seeded by `seed`) converted by the
 * project's converter: what both sides of the diffusers checks run on.
 */
export async function layOutExport(
  exportDir: string,
  work: string,
  seed: number,
): Promise<{ root: string; base: string; taesd: string }> {
  const root = join(work, "models");
  const base = join(root, "sd15-fp32");
  for (const folder of ["text_encoder", "unet", "vae_decoder", "vae_encoder"]) {
    await Deno.mkdir(join(base, folder), { recursive: true });
    for await (const e of Deno.readDir(join(exportDir, folder))) {
      if (e.isFile) await Deno.link(join(exportDir, folder, e.name), join(base, folder, e.name));
    }
  }
  await writeClipTokenizerFiles(join(base, "tokenizer"));
  await Deno.mkdir(join(base, "scheduler"));
  await Deno.writeTextFile(
    join(base, "scheduler", "scheduler_config.json"),
    JSON.stringify(SD15_CONFIG),
  );
  // TAESD: random weights in the published file's layout, converted by the project's converter.
  const taesd = join(work, "taesd_decoder.safetensors");
  const taesdBytes = taesdSafetensors(randomTaesdWeights(seed));
  await Deno.writeFile(taesd, taesdBytes);
  await Deno.mkdir(join(root, "taesd", "vae_decoder"), { recursive: true });
  await Deno.writeFile(
    join(root, "taesd", "vae_decoder", "model.onnx"),
    taesdDecoderToOnnx(taesdBytes),
  );
  return { root, base, taesd };
}

/** Runs the check with command-line `args`; returns the exit code. */
export async function runDiffusersCheck(args: readonly string[]): Promise<number> {
  const { values: v } = parseArgs({
    args: [...args],
    options: {
      export: { type: "string" },
      diffusers: { type: "string" },
      tcd: { type: "string" },
      runs: { type: "string", default: "turbo-1,turbo-2,fast-4" },
      eta: { type: "string", default: "1" },
      seed: { type: "string", default: "42" },
      size: { type: "string", default: "512" },
      python: { type: "string", default: "/usr/bin/python3" },
      out: { type: "string", default: join(REPO, ".cache/bench/diffusers.json") },
      prompt: {
        type: "string",
        default: "a lighthouse on a cliff at sunset, detailed, dramatic sky",
      },
    },
  });
  if (!v.export || !v.diffusers || !v.tcd) {
    console.error(
      "full_diffusers: --export DIR, --diffusers SRC (v0.25.0) and --tcd SRC (v0.27.2) are needed",
    );
    return 2;
  }
  const exportDir = resolve(v.export);
  const seed = Number(v.seed);
  const size = Number(v.size);
  const runs = v.runs!.split(",").map((r) => presetRun(r.trim(), Number(v.eta)));
  const work = join(benchCacheDir(), "diffusers-check");
  await Deno.remove(work, { recursive: true }).catch(() => {});
  const { root, base, taesd } = await layOutExport(exportDir, work, seed);
  // LoRAs of the published layouts. Their values are large enough to move the image well
  // past a grey level (the report says by how much), so a merge that missed would show.
  const modules = lcmLoraModules(buildFullUnet(seed));
  const loras = {
    turbo: join(work, "Hyper-SD15-1step-lora.safetensors"),
    fast: join(work, "pytorch_lora_weights.safetensors"),
  };
  await Deno.writeFile(loras.turbo, buildHyperSdLora(seed, { modules, rank: 64, scale: 0.04 }));
  await Deno.writeFile(
    loras.fast,
    buildTinyLora(seed + 1, { modules, rank: 64, alpha: 64, scale: 0.04, targets: "unet" }),
  );
  const tokenizer = await ClipTokenizer.load(join(base, "tokenizer"));
  const ids = Array.from(tokenizer.encode(v.prompt!).ids);

  // diffusers, in one process: a group per LoRA, plus turbo's first run without any LoRA.
  const pyOut = join(work, "diffusers");
  const groups = (["turbo", "fast"] as const).map((lora) => ({
    lora: loras[lora],
    runs: runs.filter((r) => r.lora === lora).map(({ lora: _, guidanceScale, ...r }) => ({
      ...r,
      guidance_scale: guidanceScale,
    })),
  })).filter((g) => g.runs.length > 0);
  const firstTurbo = runs.find((r) => r.lora === "turbo");
  if (firstTurbo) {
    groups.push({
      lora: "",
      runs: [{ ...firstTurbo, name: `${firstTurbo.name}-nolora`, guidance_scale: 0 } as never],
    });
  }
  const job = join(work, "job.json");
  await Deno.writeTextFile(
    job,
    JSON.stringify({ export: exportDir, input_ids: ids, seed, size, taesd, groups }),
  );
  const t0 = performance.now();
  const py = await runSampled(v.python!, [
    join(REPO, "bench/diffusers_pipeline.py"),
    resolve(v.diffusers),
    resolve(v.tcd),
    job,
    pyOut,
  ], "diffusers_pipeline.py");
  const pyMs = performance.now() - t0;
  const pyResult = JSON.parse(await Deno.readTextFile(join(pyOut, "result.json")));

  // The project: one process per LoRA (merged at load).
  const ours = join(work, "project");
  await Deno.mkdir(ours);
  const projectReports: Record<string, unknown> = {};
  for (const lora of ["turbo", "fast"] as const) {
    const mine = runs.filter((r) => r.lora === lora);
    if (mine.length === 0) continue;
    const { stdout, peakRss } = await runSampled(Deno.execPath(), [
      "run",
      "-P=test",
      "--quiet",
      "bench/full_diffusers_run.ts",
      "--root",
      root,
      "--out",
      ours,
      "--prompt",
      v.prompt!,
      "--seed",
      String(seed),
      "--size",
      String(size),
      "--lora",
      loras[lora],
      ...mine.flatMap((r) => [
        "--run",
        `${r.name}:${r.scheduler}:${r.steps}:${r.eta}:${r.guidanceScale}`,
      ]),
    ], `the project's ${lora} runs`);
    projectReports[lora] = { ...JSON.parse(stdout.trim().split("\n").at(-1)!), peakRss };
  }

  const rows: Record<string, unknown> = {};
  for (const r of runs) {
    const theirs = await Deno.readFile(join(pyOut, `${r.name}.rgb`));
    const mine = await Deno.readFile(join(ours, `${r.name}.rgb`));
    rows[r.name] = {
      sampling: `${r.scheduler}, ${r.steps} step${r.steps === 1 ? "" : "s"}, eta ${r.eta}, ` +
        `guidance ${r.guidanceScale}, TAESD`,
      timesteps: pyResult.runs[r.name].timesteps,
      image: compareImages(mine, theirs),
      latents: compareLatents(
        f32(await Deno.readFile(join(pyOut, `${r.name}.latents`))),
        f32(await Deno.readFile(join(ours, `${r.name}.latents`))),
      ),
    };
  }
  if (firstTurbo) {
    rows[`${firstTurbo.name}: diffusers with the LoRA vs without`] = {
      image: compareImages(
        await Deno.readFile(join(pyOut, `${firstTurbo.name}.rgb`)),
        await Deno.readFile(join(pyOut, `${firstTurbo.name}-nolora.rgb`)),
      ),
    };
  }
  const report = {
    date: new Date().toISOString(),
    machine: {
      cpus: navigator.hardwareConcurrency,
      memoryGB: Math.round(Deno.systemMemoryInfo().total / 2 ** 30),
      loadavg: Deno.loadavg(),
    },
    export: exportDir,
    prompt: v.prompt,
    seed,
    size,
    diffusers: { ...pyResult, ms: pyMs, peakRss: py.peakRss },
    project: projectReports,
    compared: rows,
  };
  await Deno.mkdir(join(v.out!, ".."), { recursive: true });
  await Deno.writeTextFile(v.out!, JSON.stringify(report, null, 2));
  for (const [name, row] of Object.entries(rows)) {
    const r = row as { image: ReturnType<typeof compareImages>; latents?: { maxAbs: number } };
    console.log(
      `${name}: max ${r.image.maxDiff} grey levels, mean ${r.image.meanDiff.toFixed(4)}, ` +
        `PSNR ${r.image.psnrDb.toFixed(1)} dB` +
        (r.latents ? `, latents max |Δ| ${r.latents.maxAbs.toExponential(2)}` : ""),
    );
  }
  console.log(`JSON: ${v.out}`);
  return 0;
}

if (import.meta.main) Deno.exit(await runDiffusersCheck(Deno.args));
