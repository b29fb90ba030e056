/**
 * The full-size check of `deno task models add` against diffusers itself
 * (not a test: it needs two diffusers checkouts, up to 21 GB on diffusers'
 * side and 6 GB on the project's, one side at a time, and 14 minutes on 2
 * cores). A random-weight SD 1.5 is written, by
 * diffusers' own code (`diffusers_checkpoint.py`), in each form users have
 * it: an original-layout single file in fp32 and in fp16 (diffusers'
 * `scripts/convert_diffusers_to_original_stable_diffusion.py`, run as a user
 * runs it, `--half` for fp16), a diffusers folder (`save_pretrained`), and a
 * second VAE in the original VAE-file layout. Then:
 *
 * - diffusers reads each file back as `from_single_file` does (its
 *   `convert_ldm_*_checkpoint` key maps) and the folder as `from_pretrained`
 *   does, and makes the reference images with its own
 *   `StableDiffusionPipeline` (`LCMScheduler`, guidance 0, the full
 *   `AutoencoderKL` decoder): on the fp32 file's weights, on the fp16 file's
 *   (widened to float32, as it loads them) and on the fp32 file's with the
 *   second VAE; the folder must read to exactly the fp32 file's weights;
 * - the project adds each form with `deno task models add --write-config`
 *   into a fresh models root of its own (the VAE with `--component vae` onto
 *   the fp32 file's root), and runs the engine on the set the written config
 *   names (`full_diffusers_run.ts`), the same prompt ids, scheduler, steps
 *   and seed, the full VAE decoder;
 *
 * and reports, per form, the largest difference from diffusers' image in
 * grey levels, the mean, PSNR, and the largest differences of the latents
 * the VAE decoded and of the conditioning; and, on each side, how far the
 * second VAE and the fp16 rounding move the image (so a check that ignored
 * the VAE would show). Exit status 1 when a form differs by more than one
 * grey level. docs/performance.md ("Checkpoints against diffusers").
 *
 * ```sh
 * deno task bench --checkpoint-check --diffusers SRC_0_25_0 --convert-src SRC_0_27_2
 *   [--steps 1] [--seed 42] [--small] [--keep] [--python /usr/bin/python3]
 *   [--out .cache/bench/checkpoint-check.json]
 * ```
 *
 * `--small`: the same at test widths (64×64 images, seconds), to try it.
 *
 * @module
 */

import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { parse as parseToml } from "smol-toml";
import { ClipTokenizer, writeClipTokenizerFiles } from "../mod/tokenizer/mod.ts";
import { compareImages, compareLatents, f32, runSampled as runChecked } from "./full_diffusers.ts";
import { benchCacheDir } from "./full_models.ts";
import { runSampled } from "./proc_sampler.ts";

const REPO = fileURLToPath(new URL("../", import.meta.url));

/** The prompt of every run (its ids, the project's tokenizer's, go to diffusers' side). */
export const PROMPT = "a lighthouse on a cliff at sunset, detailed, dramatic sky";

/** The files `diffusers_checkpoint.py` writes, by form. */
export const FILES = {
  fp32: "sd15-random-fp32.safetensors",
  fp16: "sd15-random-fp16.safetensors",
  diffusers: "sd15-random-diffusers",
  vae: "vae-random.safetensors",
} as const;

/** One image the project makes: the form added, whether the VAE is, and diffusers' image it must equal. */
export interface CheckRun {
  /** Its name (file stem of the outputs). */
  name: string;
  /** The form `models add` converts (a key of {@link FILES}). */
  form: "fp32" | "fp16" | "diffusers";
  /** With the second VAE added by `--component vae`. */
  vae: boolean;
  /** diffusers' image it is compared with. */
  reference: "fp32" | "fp16" | "fp32-vae";
  /** What it checks, for the report. */
  what: string;
}

/** The project's runs, in order (one models root per form). */
export const RUNS: readonly CheckRun[] = [
  {
    name: "fp16",
    form: "fp16",
    vae: false,
    reference: "fp16",
    what: "original-layout single file, fp16 (the script's --half)",
  },
  {
    name: "fp32",
    form: "fp32",
    vae: false,
    reference: "fp32",
    what: "original-layout single file, fp32",
  },
  {
    name: "fp32-vae",
    form: "fp32",
    vae: true,
    reference: "fp32-vae",
    what: "the fp32 file with a standalone VAE file (--component vae)",
  },
  {
    name: "diffusers",
    form: "diffusers",
    vae: false,
    reference: "fp32",
    what: "diffusers folder (save_pretrained, safetensors)",
  },
];

/** The check's options. */
export interface CheckOptions {
  diffusers: string;
  convertScript: string;
  steps: number;
  seed: number;
  vaeSeed: number;
  size: number;
  small: boolean;
  keep: boolean;
  python: string;
  out: string;
}

/** Command-line arguments → options, or the one line that says what is wrong. */
export function parseCheckArgs(args: readonly string[]): CheckOptions | string {
  let v;
  try {
    ({ values: v } = parseArgs({
      args: [...args],
      options: {
        diffusers: { type: "string" },
        "convert-src": { type: "string" },
        steps: { type: "string", default: "1" },
        seed: { type: "string", default: "42" },
        small: { type: "boolean", default: false },
        keep: { type: "boolean", default: false },
        python: { type: "string", default: "/usr/bin/python3" },
        out: { type: "string" },
      },
    }));
  } catch (e) {
    return `full_checkpoint_check: ${(e as Error).message}`;
  }
  if (!v.diffusers || !v["convert-src"]) {
    return "full_checkpoint_check: --diffusers SRC (v0.25.0) and --convert-src SRC (v0.27.0 or " +
      "later: its scripts/convert_diffusers_to_original_stable_diffusion.py) are needed";
  }
  const steps = Number(v.steps), seed = Number(v.seed);
  if (!Number.isInteger(steps) || steps < 1) {
    return `full_checkpoint_check: --steps must be a whole number ≥ 1, got ${v.steps}`;
  }
  if (!Number.isInteger(seed) || seed < 0) {
    return `full_checkpoint_check: --seed must be a whole number ≥ 0, got ${v.seed}`;
  }
  return {
    diffusers: resolve(v.diffusers),
    convertScript: join(
      resolve(v["convert-src"]),
      "scripts",
      "convert_diffusers_to_original_stable_diffusion.py",
    ),
    steps,
    seed,
    vaeSeed: seed + 1,
    size: v.small ? 64 : 512,
    small: v.small!,
    keep: v.keep!,
    python: v.python!,
    out: v.out ??
      join(REPO, `.cache/bench/checkpoint-check${v.small ? "-small" : ""}.json`),
  };
}

/** `[models] base` and `vae` of the `config.local.toml` that `models add --write-config` wrote. */
export function configuredSet(tomlText: string): { base: string; vae?: string } {
  const models = (parseToml(tomlText).models ?? {}) as Record<string, unknown>;
  if (typeof models.base !== "string") {
    throw new Error("models add --write-config wrote no [models] base into config.local.toml");
  }
  return {
    base: models.base,
    ...(typeof models.vae === "string" ? { vae: models.vae } : {}),
  };
}

/** A compared row of the report. */
export interface Compared {
  image: ReturnType<typeof compareImages>;
  latents?: ReturnType<typeof compareLatents>;
  conditioningMaxAbs?: number;
}

/** The summary line of a row. */
export function summaryLine(name: string, r: Compared): string {
  return `${name}: max ${r.image.maxDiff} grey level${r.image.maxDiff === 1 ? "" : "s"}, ` +
    `mean ${r.image.meanDiff.toFixed(4)}, PSNR ${r.image.psnrDb.toFixed(1)} dB` +
    (r.conditioningMaxAbs === undefined
      ? ""
      : `, conditioning max |Δ| ${r.conditioningMaxAbs.toExponential(2)}`) +
    (r.latents ? `, latents max |Δ| ${r.latents.maxAbs.toExponential(2)}` : "");
}

/** The runs whose image differs from diffusers' by more than one grey level. */
export function failing(compared: Record<string, Compared>): string[] {
  return RUNS.filter((r) => (compared[r.name]?.image.maxDiff ?? Infinity) > 1).map((r) => r.name);
}

/** Hard-links a file, or a folder's files recursively, to `to`. */
async function linkTree(from: string, to: string): Promise<void> {
  const info = await Deno.stat(from);
  if (info.isFile) return await Deno.link(from, to);
  await Deno.mkdir(to, { recursive: true });
  for await (const e of Deno.readDir(from)) await linkTree(join(from, e.name), join(to, e.name));
}

/** Largest absolute difference of two float arrays of the same length. */
function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) throw new Error(`lengths differ: ${a.length} vs ${b.length}`);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

/** `deno task models add ARGS` in the models root `dir` (its config.toml); throws with the log's tail. */
async function modelsAdd(dir: string, args: string[]) {
  const run = await runSampled(Deno.execPath(), [
    "run",
    "--config",
    join(REPO, "deno.json"),
    "-P=models",
    "--quiet",
    join(REPO, "mod/models/cli.ts"),
    "add",
    ...args,
    "--write-config",
  ], { cwd: dir, env: { NO_COLOR: "1" } });
  const tail = run.lines.slice(-4).map((l) => l.text);
  if (run.code !== 0) {
    throw new Error(`models add ${args.join(" ")} failed (exit ${run.code}):\n${tail.join("\n")}`);
  }
  return { ms: run.ms, peakRss: run.peakRss, tail };
}

/** Runs the check with command-line `args`; returns the exit code. */
export async function runCheckpointCheck(args: readonly string[]): Promise<number> {
  const o = parseCheckArgs(args);
  if (typeof o === "string") {
    console.error(o);
    return 2;
  }
  const work = join(benchCacheDir(), `checkpoint-check${o.small ? "-small" : ""}`);
  await Deno.remove(work, { recursive: true }).catch(() => {});
  const checkpoints = join(work, "checkpoints");
  await Deno.mkdir(checkpoints, { recursive: true });
  const tokenizerDir = join(work, "tokenizer");
  await writeClipTokenizerFiles(tokenizerDir);
  const tokenizer = await ClipTokenizer.load(tokenizerDir);
  const job = join(work, "job.json");
  await Deno.writeTextFile(
    job,
    JSON.stringify({
      small: o.small,
      seed: o.seed,
      vae_seed: o.vaeSeed,
      size: o.size,
      steps: o.steps,
      input_ids: Array.from(tokenizer.encode(PROMPT).ids),
      tokenizer: tokenizerDir,
      checkpoints,
      convert_script: o.convertScript,
    }),
  );

  // diffusers first: it writes the files the project adds.
  const pyOut = join(work, "diffusers");
  const t0 = performance.now();
  const py = await runChecked(o.python, [
    join(REPO, "bench/diffusers_checkpoint.py"),
    o.diffusers,
    job,
    pyOut,
  ], "diffusers_checkpoint.py");
  const pyMs = performance.now() - t0;
  const pyResult = JSON.parse(await Deno.readTextFile(join(pyOut, "result.json")));
  console.error(`diffusers: ${(pyMs / 1000).toFixed(0)} s, peak RSS ${py.peakRss}`);

  // The project: a fresh models root per form, models add, then the engine on what the config names.
  const ours = join(work, "project");
  await Deno.mkdir(ours);
  const project: Record<string, unknown> = {};
  for (const form of ["fp16", "fp32", "diffusers"] as const) {
    const dir = join(work, "roots", form);
    const models = join(dir, "models");
    await Deno.mkdir(join(models, "checkpoints"), { recursive: true });
    await Deno.writeTextFile(join(dir, "config.toml"), '[models]\nroot = "models"\n');
    await Deno.writeTextFile(join(dir, "models.lock"), "");
    await linkTree(join(checkpoints, FILES[form]), join(models, "checkpoints", FILES[form]));
    const added: Record<string, unknown> = {
      [form]: await modelsAdd(dir, [join("models", "checkpoints", FILES[form])]),
    };
    const runs = RUNS.filter((r) => r.form === form);
    if (runs.some((r) => r.vae)) {
      await Deno.link(join(checkpoints, FILES.vae), join(models, "checkpoints", FILES.vae));
      added.vae = await modelsAdd(dir, [
        "--component",
        "vae",
        join("models", "checkpoints", FILES.vae),
      ]);
    }
    const set = configuredSet(await Deno.readTextFile(join(dir, "config.local.toml")));
    const engines: Record<string, unknown> = {};
    for (const run of runs) {
      const { stdout, peakRss } = await runChecked(Deno.execPath(), [
        "run",
        "-P=test",
        "--quiet",
        "bench/full_diffusers_run.ts",
        "--root",
        models,
        "--base",
        set.base,
        "--vae",
        "full",
        ...(run.vae ? ["--vae-set", join(models, set.vae!)] : []),
        "--out",
        ours,
        "--prompt",
        PROMPT,
        "--seed",
        String(o.seed),
        "--size",
        String(o.size),
        "--run",
        `${run.name}:lcm:${o.steps}:0:0`,
      ], `the project's ${run.name} run`);
      engines[run.name] = { ...JSON.parse(stdout.trim().split("\n").at(-1)!), peakRss };
      console.error(`project ${run.name}: done`);
    }
    project[form] = { set, added, engines };
    if (!o.keep) await Deno.remove(join(models, "converted"), { recursive: true });
  }

  const read = async (dir: string, name: string, ext: string) =>
    await Deno.readFile(join(dir, `${name}.${ext}`));
  const compared: Record<string, Compared & { what?: string; reference?: string }> = {};
  for (const r of RUNS) {
    compared[r.name] = {
      what: r.what,
      reference: r.reference,
      image: compareImages(await read(ours, r.name, "rgb"), await read(pyOut, r.reference, "rgb")),
      latents: compareLatents(
        f32(await read(pyOut, r.reference, "latents")),
        f32(await read(ours, r.name, "latents")),
      ),
      conditioningMaxAbs: maxAbsDiff(
        f32(await read(pyOut, r.reference, "embeds")),
        f32(await read(ours, r.name, "embeds")),
      ),
    };
  }
  // What a check that ignored the VAE, or the fp16 rounding, would miss: each side's own images.
  const effect = async (dir: string, a: string, b: string): Promise<Compared> => ({
    image: compareImages(await read(dir, a, "rgb"), await read(dir, b, "rgb")),
  });
  compared["diffusers: the second VAE vs the checkpoint's"] = await effect(
    pyOut,
    "fp32-vae",
    "fp32",
  );
  compared["project: the second VAE vs the checkpoint's"] = await effect(ours, "fp32-vae", "fp32");
  compared["diffusers: fp16 file vs fp32 file"] = await effect(pyOut, "fp16", "fp32");
  compared["project: fp16 file vs fp32 file"] = await effect(ours, "fp16", "fp32");
  const report = {
    date: new Date().toISOString(),
    machine: {
      cpus: navigator.hardwareConcurrency,
      memoryGB: Math.round(Deno.systemMemoryInfo().total / 2 ** 30),
      loadavg: Deno.loadavg(),
    },
    prompt: PROMPT,
    seed: o.seed,
    vaeSeed: o.vaeSeed,
    size: o.size,
    steps: o.steps,
    small: o.small,
    sampling: `lcm, ${o.steps} step${o.steps === 1 ? "" : "s"}, guidance 0, full VAE decoder`,
    diffusers: { ...pyResult, ms: pyMs, peakRss: py.peakRss },
    project,
    compared,
  };
  await Deno.mkdir(join(o.out, ".."), { recursive: true });
  await Deno.writeTextFile(o.out, JSON.stringify(report, null, 2));
  for (const [name, row] of Object.entries(compared)) console.log(summaryLine(name, row));
  console.log(`JSON: ${o.out}`);
  const bad = failing(compared);
  if (bad.length > 0) {
    console.error(`differ from diffusers by more than one grey level: ${bad.join(", ")}`);
    return 1;
  }
  return 0;
}

if (import.meta.main) Deno.exit(await runCheckpointCheck(Deno.args));
