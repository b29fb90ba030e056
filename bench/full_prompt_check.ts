/**
 * The full-size check of a textual-inversion embedding and CLIP skip against
 * diffusers itself (not a test: it needs a diffusers export and checkout and
 * about 6 GB per side, and takes minutes). On the random-weight SD 1.5 that
 * `diffusers_export.py` exports, with an embedding of three random vectors
 * (AUTOMATIC1111's `.safetensors` layout, `emb_params` [3, 768], for the
 * project; the same vectors as diffusers' `{token: tensor}` for diffusers), it
 * makes the same images twice from the same prompt text and seed:
 *
 * - diffusers: `StableDiffusionPipeline` from the prompt text, the embedding
 *   loaded by `load_textual_inversion`, `clip_skip` none or 1, `LCMScheduler`,
 *   guidance 0, `AutoencoderTiny` with TAESD weights (`diffusers_prompt.py`);
 * - the project: the engine on the same export with `[prompt] syntax =
 *   "a1111"`, the embedding file in `embeddings` and `clip_skip` 1 or 2, the
 *   same scheduler, steps and seed (`full_diffusers_run.ts`);
 *
 * and reports, per run, the largest difference in grey levels, the mean,
 * PSNR, the largest difference of the latents the VAE decoded and of the
 * conditioning the UNet was given; and, on diffusers' side, how far the
 * embedding and CLIP skip move the image (so a check that ignored them would
 * show). docs/performance.md ("Embeddings and CLIP skip against diffusers").
 *
 * ```sh
 * deno task bench --prompt-check --export DIR --diffusers SRC_0_25_0 [--steps 1] [--seed 42]
 *   [--python /usr/bin/python3] [--out .cache/bench/prompt-check.json]
 * ```
 *
 * @module
 */

import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { encodeSafetensors } from "../tests/fixtures/builder/mod.ts";
import { ClipTokenizer } from "../mod/tokenizer/mod.ts";
import { compareImages, compareLatents, f32, layOutExport, runSampled } from "./full_diffusers.ts";
import { benchCacheDir } from "./full_models.ts";

const REPO = fileURLToPath(new URL("../../", import.meta.url));

/** The embedding's word: not a CLIP vocabulary entry, so diffusers accepts it as a new token. */
export const EMBEDDING_WORD = "zqxstyle";
/** How many vectors the embedding has (diffusers adds `zqxstyle_1`, `zqxstyle_2`). */
export const EMBEDDING_VECTORS = 3;
const WIDTH = 768;

/** The prompts: the embedding called by its word, and the same text without it. */
export const PROMPTS = {
  embedding:
    `a lighthouse on a cliff at sunset in the style of ${EMBEDDING_WORD} with a dramatic sky`,
  plain: "a lighthouse on a cliff at sunset with a dramatic sky",
};

/** The embedding's vectors: uniform in ±0.04 (the token table's scale) from a seeded LCG. */
export function embeddingVectors(seed: number): Float32Array {
  const out = new Float32Array(EMBEDDING_VECTORS * WIDTH);
  let s = seed >>> 0;
  for (let i = 0; i < out.length; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0; // Numerical Recipes' LCG
    out[i] = (s / 2 ** 32 - 0.5) * 0.08;
  }
  return out;
}

/** Every word of the prompts but the embedding's, with the ids the project's tokenizer gives it. */
export function wordTable(tokenizer: ClipTokenizer, prompts: readonly string[]) {
  const words: Record<string, number[]> = {};
  for (const p of prompts) {
    for (const w of p.toLowerCase().split(/\s+/)) {
      if (w && w !== EMBEDDING_WORD) words[w] = tokenizer.tokenize(w);
    }
  }
  return words;
}

/** Largest absolute difference of two float arrays of the same length. */
function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) throw new Error(`lengths differ: ${a.length} vs ${b.length}`);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

/** Runs the check with command-line `args`; returns the exit code. */
export async function runPromptCheck(args: readonly string[]): Promise<number> {
  const { values: v } = parseArgs({
    args: [...args],
    options: {
      export: { type: "string" },
      diffusers: { type: "string" },
      steps: { type: "string", default: "1" },
      seed: { type: "string", default: "42" },
      size: { type: "string", default: "512" },
      python: { type: "string", default: "/usr/bin/python3" },
      out: { type: "string", default: join(REPO, ".cache/bench/prompt-check.json") },
    },
  });
  if (!v.export || !v.diffusers) {
    console.error("full_prompt_check: --export DIR and --diffusers SRC (v0.25.0) are needed");
    return 2;
  }
  const exportDir = resolve(v.export);
  const seed = Number(v.seed);
  const size = Number(v.size);
  const steps = Number(v.steps);
  const work = join(benchCacheDir(), "prompt-check");
  await Deno.remove(work, { recursive: true }).catch(() => {});
  const { root, base, taesd } = await layOutExport(exportDir, work, seed);
  const vectors = embeddingVectors(seed);
  const embeddingFile = join(root, "embeddings", `${EMBEDDING_WORD}.safetensors`);
  await Deno.mkdir(join(root, "embeddings"));
  await Deno.writeFile(
    embeddingFile,
    encodeSafetensors([{
      name: "emb_params",
      dtype: "F32",
      shape: [EMBEDDING_VECTORS, WIDTH],
      data: vectors,
    }]),
  );
  const tokenizer = await ClipTokenizer.load(join(base, "tokenizer"));
  // Project clip skip 2 is diffusers' clip_skip 1; project 1 is diffusers' none.
  const runs = [
    { name: "embedding", prompt: PROMPTS.embedding, clipSkip: 1 },
    { name: "plain", prompt: PROMPTS.plain, clipSkip: 1 },
    { name: "embedding-clip-skip-2", prompt: PROMPTS.embedding, clipSkip: 2 },
    { name: "plain-clip-skip-2", prompt: PROMPTS.plain, clipSkip: 2 },
  ];
  const job = join(work, "job.json");
  await Deno.writeTextFile(
    job,
    JSON.stringify({
      export: exportDir,
      vocab: join(base, "tokenizer", "vocab.json"),
      words: wordTable(tokenizer, Object.values(PROMPTS)),
      seed,
      size,
      steps,
      taesd,
      embedding: {
        name: EMBEDDING_WORD,
        vectors: Array.from(
          { length: EMBEDDING_VECTORS },
          (_, i) => Array.from(vectors.subarray(i * WIDTH, (i + 1) * WIDTH)),
        ),
      },
      runs: runs.map((r) => ({
        name: r.name,
        prompt: r.prompt,
        clip_skip: r.clipSkip === 1 ? null : r.clipSkip - 1,
      })),
    }),
  );
  const pyOut = join(work, "diffusers");
  const t0 = performance.now();
  const py = await runSampled(v.python!, [
    join(REPO, "bench/diffusers_prompt.py"),
    resolve(v.diffusers),
    job,
    pyOut,
  ], "diffusers_prompt.py");
  const pyMs = performance.now() - t0;
  const pyResult = JSON.parse(await Deno.readTextFile(join(pyOut, "result.json")));

  // The project: one process per clip skip (an engine setting).
  const ours = join(work, "project");
  await Deno.mkdir(ours);
  const projectReports: Record<string, unknown> = {};
  for (const clipSkip of [1, 2]) {
    const mine = runs.filter((r) => r.clipSkip === clipSkip);
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
      PROMPTS.plain,
      "--seed",
      String(seed),
      "--size",
      String(size),
      "--syntax",
      "a1111",
      "--clip-skip",
      String(clipSkip),
      "--embedding",
      embeddingFile,
      ...mine.flatMap((r) => [
        "--run",
        `${r.name}:lcm:${steps}:0:0`,
        "--prompt-of",
        `${r.name}=${r.prompt}`,
      ]),
    ], `the project's clip skip ${clipSkip} runs`);
    projectReports[`clip skip ${clipSkip}`] = {
      ...JSON.parse(stdout.trim().split("\n").at(-1)!),
      peakRss,
    };
  }

  const read = async (dir: string, name: string, ext: string) =>
    await Deno.readFile(join(dir, `${name}.${ext}`));
  const compared: Record<string, unknown> = {};
  for (const r of runs) {
    compared[r.name] = {
      prompt: r.prompt,
      clipSkip: { project: r.clipSkip, diffusers: r.clipSkip === 1 ? null : r.clipSkip - 1 },
      image: compareImages(await read(ours, r.name, "rgb"), await read(pyOut, r.name, "rgb")),
      latents: compareLatents(
        f32(await read(pyOut, r.name, "latents")),
        f32(await read(ours, r.name, "latents")),
      ),
      conditioningMaxAbs: maxAbsDiff(
        f32(await read(pyOut, r.name, "embeds")),
        f32(await read(ours, r.name, "embeds")),
      ),
    };
  }
  // What a check that ignored the embedding or clip skip would miss (diffusers' own images).
  const effect = async (a: string, b: string) => ({
    image: compareImages(await read(pyOut, a, "rgb"), await read(pyOut, b, "rgb")),
    conditioningMaxAbs: maxAbsDiff(
      f32(await read(pyOut, a, "embeds")),
      f32(await read(pyOut, b, "embeds")),
    ),
  });
  compared["diffusers: embedding prompt vs plain prompt"] = await effect("embedding", "plain");
  compared["diffusers: clip_skip 1 vs none (plain prompt)"] = await effect(
    "plain-clip-skip-2",
    "plain",
  );
  const report = {
    date: new Date().toISOString(),
    machine: {
      cpus: navigator.hardwareConcurrency,
      memoryGB: Math.round(Deno.systemMemoryInfo().total / 2 ** 30),
      loadavg: Deno.loadavg(),
    },
    export: exportDir,
    seed,
    size,
    steps,
    embedding: { word: EMBEDDING_WORD, vectors: EMBEDDING_VECTORS, file: embeddingFile },
    diffusers: { ...pyResult, ms: pyMs, peakRss: py.peakRss },
    project: projectReports,
    compared,
  };
  await Deno.mkdir(join(v.out!, ".."), { recursive: true });
  await Deno.writeTextFile(v.out!, JSON.stringify(report, null, 2));
  for (const [name, row] of Object.entries(compared)) {
    const r = row as {
      image: ReturnType<typeof compareImages>;
      latents?: { maxAbs: number };
      conditioningMaxAbs: number;
    };
    console.log(
      `${name}: max ${r.image.maxDiff} grey levels, mean ${r.image.meanDiff.toFixed(4)}, ` +
        `PSNR ${r.image.psnrDb.toFixed(1)} dB, conditioning max |Δ| ` +
        r.conditioningMaxAbs.toExponential(2) +
        (r.latents ? `, latents max |Δ| ${r.latents.maxAbs.toExponential(2)}` : ""),
    );
  }
  console.log(`JSON: ${v.out}`);
  return 0;
}

if (import.meta.main) Deno.exit(await runPromptCheck(Deno.args));
