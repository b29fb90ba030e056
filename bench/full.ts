/**
 * `deno task bench --full`: the full-size benchmark (not a test). Builds the
 * full-size SD 1.5 sets (`full_models.ts`, outside the repository), then runs
 * each scenario in its own process (`full_run.ts`, so peak RSS is per
 * scenario) and the real server for start-up, writes JSON and prints a
 * table. Method and results: docs/performance.md.
 *
 * Flags: `--steps N` (default 2: UNet steps of the default-preset scenario; its
 * 25-step time is extrapolated from the per-step median; `--steps 25` measures
 * the whole default image, about 7 more minutes on 2 cores), `--size S`
 * (512), `--only a,b` (scenario numbers or names; `fresh` = the fresh-defaults
 * scenario of `fresh.ts`, `startup` = the start-up run, `chunks` = the long-prompt
 * scenarios), `--lpb 1`
 * (reduced-depth UNet for development), `--out FILE` (JSON; default
 * `.cache/bench/full.json`). The "fp32 DERIVED" scenario runs on the set the
 * fresh-defaults scenario derived, so choosing it runs that one first;
 * `--fresh-reuse` keeps that scenario's models root from an earlier run (its
 * `deno task models` then finds everything in place) instead of laying it
 * out anew. `--fresh-export DIR` runs the fresh-defaults scenario once more
 * with a diffusers-ONNX folder made by a real exporter (the diffusers script,
 * Optimum) as the fp32 set (`--only fresh-export`: that run alone).
 *
 * @module
 */

import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { Client, StdioClientTransport } from "../mod/mcp/client_sdk.ts";
import { SD15_PARAMS } from "../tests/fixtures/builder/mod.ts";
import {
  benchCacheDir,
  buildFullExtras,
  buildFullSet,
  type FullExtras,
  type FullSet,
} from "./full_models.ts";
import { readDerivedRecord } from "../mod/models/mod.ts";
import type { RunReport } from "./full_run.ts";
import { imageScenarios, upscaleEstimates } from "./full_image.ts";
import { runModelsAddBench } from "./models_add.ts";
import { sampleRss } from "./proc_memory.ts";
import { runFreshDefaults, spawnServer } from "./fresh.ts";

const REPO = fileURLToPath(new URL("../", import.meta.url));

/** One scenario: a name, the set it runs on and the runner's flags. */
interface Scenario {
  name: string;
  /** The built fp32 or fp16 set, or the fp32 set derived from the fp16 one ("fresh defaults"). */
  precision: "fp32" | "fp16" | "derived";
  /** The runner's flags; `$LORA` and `$ANNOTATOR` are replaced by the extras' paths. */
  args: string[];
  /** Needs {@link buildFullExtras} (ControlNet, residual UNet, LCM-shaped LoRA). */
  extras?: boolean;
  /** The runner script (default `bench/full_run.ts`; image scenarios: `full_image_run.ts`). */
  runner?: string;
  /** A name `--only` picks the scenario's whole group by (`chunks`). */
  group?: string;
}

/**
 * Long prompts: the `fast` and `turbo` presets' sampling with a positive
 * prompt of 1, 2 and 4 of AUTOMATIC1111's 75-token chunks (`[prompt] syntax
 * = "a1111"`; `full_run.ts` `chunkedPrompt`): k chunks through the text encoder
 * (one run at batch k) and a UNet cross-attention over 77·k positions, timed
 * after one untimed image. `--only chunks` runs these alone.
 */
function chunkScenarios(common: readonly string[]): Scenario[] {
  return (["fast", "turbo"] as const).flatMap((preset) =>
    [1, 2, 4].map((k) => ({
      name: `${preset} preset, fp32, tiny VAE, a1111 prompt of ${k} chunk${k === 1 ? "" : "s"}`,
      precision: "fp32" as const,
      // One untimed image first: a session's first run plans its memory (turbo's only UNet
      // call would be that one), which a warmed-up server has done before its first request.
      args: [
        ...common,
        "--preset",
        preset,
        "--vae",
        "tiny",
        "--syntax",
        "a1111",
        "--chunks",
        `${k}`,
        "--warmup",
        "1",
      ],
      group: "chunks",
    }))
  );
}

/** The test-sized depth annotator (`deno task fixtures`): guided runs need one, its cost is not measured. */
const TINY_ANNOTATOR = join(REPO, "tests/fixtures/tiny/models/annotators/depth.onnx");

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length === 0 ? NaN : s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

const GB = 1e9;

async function runScenario(
  set: FullSet,
  s: Scenario,
): Promise<(RunReport & { sampledPeakRss: number }) | { error: string }> {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-P=test",
      "--quiet",
      s.runner ?? "bench/full_run.ts",
      "--root",
      set.root,
      ...s.args,
    ],
    cwd: REPO,
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const sampler = sampleRss(child.pid);
  const out = await child.output();
  const sampledPeakRss = await sampler.stop();
  const stdout = new TextDecoder().decode(out.stdout).trim().split("\n").at(-1) ?? "";
  if (out.code !== 0 || !stdout.startsWith("{")) {
    const err = new TextDecoder().decode(out.stderr).trim().split("\n").slice(-5).join(" | ");
    return { error: `exit ${out.code}: ${err}` };
  }
  return { ...(JSON.parse(stdout) as RunReport), sampledPeakRss };
}

/** Bytes of the extras a scenario opens: the LoRA, or the ControlNet and residual UNet with their data. */
async function extraBytes(set: FullSet, extras: FullExtras, guided: boolean): Promise<number> {
  const paths = guided ? [extras.controlnet, extras.controlnetUnet] : [extras.lora];
  let n = 0;
  for (const p of paths) {
    const dir = join(set.root, p, "..");
    // The model file and its external data, which sit alone in their folder.
    for await (const e of Deno.readDir(dir)) {
      if (e.isFile) n += (await Deno.stat(join(dir, e.name))).size;
    }
  }
  return n;
}

/** Spawns the real server on the set: ms to the `initialize` reply, and to the first image. */
async function startup(set: FullSet): Promise<Record<string, number | string>> {
  const dir = await Deno.makeTempDir({ prefix: "sd15-bench-" });
  try {
    const config = join(dir, "config.toml");
    await Deno.writeTextFile(
      config,
      `[server]\ndata_dir = ${JSON.stringify(join(dir, "data"))}\n` +
        `[models]\nroot = ${JSON.stringify(set.root)}\nlock = ${
          JSON.stringify(join(set.root, "models.lock"))
        }\n` +
        // The bench sets keep their graphs in sd15/ whatever their precision.
        // Fast sampling without the LCM LoRA: this measures the plain set's start.
        `base = "sd15"\nvae_decoder = "tiny"\n[generation]\npreset = "custom"\nsteps = 4\n` +
        `scheduler = "lcm"\nguidance_scale = 1\n`,
    );
    const t0 = performance.now();
    const { transport, client, stderr } = spawnServer(config);
    try {
      return await measure(client, transport, t0, stderr);
    } catch (e) {
      return { error: (e as Error).message, stderr: stderr().slice(-600) };
    }
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

async function measure(
  client: Client,
  transport: StdioClientTransport,
  t0: number,
  stderr: () => string,
): Promise<Record<string, number | string>> {
  {
    await client.connect(transport);
    const initializeMs = performance.now() - t0;
    const tools = await client.listTools();
    const toolsMs = performance.now() - t0;
    const result = await client.callTool(
      {
        name: "generate_image",
        arguments: { positive_prompt: "a lighthouse", size: "square_512" },
      },
      undefined,
      { timeout: 1_800_000 },
    );
    const firstImageMs = performance.now() - t0;
    await client.close();
    return {
      initializeMs,
      toolsListMs: toolsMs,
      tools: tools.tools.length,
      firstImageMs,
      firstImage: result.isError ? `error: ${JSON.stringify(result.content).slice(0, 200)}` : "ok",
      ...(result.isError ? { stderr: stderr().slice(-400) } : {}),
    };
  }
}

/**
 * The default preset's 25-step image from a run of fewer steps: text + 26
 * UNet calls (PNDM with `skip_prk_steps` calls the UNet once more than its
 * steps) + VAE + the measured overhead, with the median and the fastest call.
 */
function estimateDefault(r: RunReport): { minMs: number; medianMs: number } {
  const unet = r.runs.unet ?? [];
  const g = r.generations.at(-1)!;
  const fixed = (r.runs.text_encoder ?? []).reduce((a, b) => a + b, 0) +
    (r.runs.vae_decoder ?? []).reduce((a, b) => a + b, 0) + (g.totalMs - g.sessionMs);
  return { minMs: fixed + 26 * Math.min(...unet), medianMs: fixed + 26 * median(unet) };
}

function fmtMs(ms: number): string {
  return ms >= 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`;
}

/**
 * The fp32 set `deno task models` derived in the fresh-defaults root, as a
 * {@link FullSet} whose files are the `sd15-fp32-derived/` ones (from their
 * records) and the TAESD decoder, under the paths the scenarios filter by.
 */
async function derivedSet(root: string): Promise<FullSet> {
  const files: FullSet["files"] = [];
  for (const c of ["text_encoder", "unet", "vae_decoder", "tokenizer", "scheduler"]) {
    const record = await readDerivedRecord(join(root, "sd15-fp32-derived", c));
    for (const f of record?.files ?? []) {
      files.push({ path: `sd15/${c}/${f.name}`, component: c, size: f.size, sha256: f.sha256 });
    }
  }
  const taesd = await readDerivedRecord(join(root, "taesd/vae_decoder"));
  for (const f of taesd?.files ?? []) {
    files.push({
      path: `taesd/vae_decoder/${f.name}`,
      component: "vae_decoder",
      size: f.size,
      sha256: f.sha256,
    });
  }
  return { root, files, params: {}, reused: true };
}

/** Runs the full-size benchmark with command-line `args`; returns the exit code. */
export async function runFullBench(args: readonly string[]): Promise<number> {
  const { values: v } = parseArgs({
    args: [...args],
    options: {
      full: { type: "boolean" },
      steps: { type: "string", default: "2" },
      size: { type: "string", default: "512" },
      only: { type: "string" },
      lpb: { type: "string", default: "2" },
      out: { type: "string" },
      "fresh-reuse": { type: "boolean" },
      "fresh-export": { type: "string" },
    },
  });
  const steps = v.steps!;
  const size = v.size!;
  const lpb = Number(v.lpb);
  const common = ["--size", size];
  const scenarios: Scenario[] = [
    {
      name: "default preset (pndm, CFG), fp32, full VAE, arena off",
      precision: "fp32",
      args: [...common, "--steps", steps],
    },
    {
      name: "fast preset (lcm, 4 steps, no CFG), fp32, tiny VAE, arena off",
      precision: "fp32",
      args: [...common, "--preset", "fast", "--vae", "tiny"],
    },
    {
      name: "fast preset, fp32, tiny VAE, arena ON",
      precision: "fp32",
      args: [...common, "--preset", "fast", "--vae", "tiny", "--arena", "on"],
    },
    {
      name: "fast preset, fp16, tiny VAE, arena off",
      precision: "fp16",
      args: [...common, "--preset", "fast", "--vae", "tiny"],
    },
    {
      name: "fast preset, fp32, tiny VAE, arena off, memory pattern off",
      precision: "fp32",
      args: [...common, "--preset", "fast", "--vae", "tiny", "--pattern", "off"],
    },
    {
      name: "fast preset, fp32 DERIVED from the fp16 set, tiny VAE, arena off",
      precision: "derived",
      args: [...common, "--preset", "fast", "--vae", "tiny", "--base", "sd15-fp32-derived"],
    },
    {
      name: "fast preset + LCM-shaped LoRA merged at start-up, fp32, tiny VAE",
      precision: "fp32",
      args: [...common, "--preset", "fast", "--vae", "tiny", "--lora", "$LORA"],
      extras: true,
    },
    {
      name: "guided (depth ControlNet + residual UNet), fast preset, fp32, tiny VAE",
      precision: "fp32",
      args: [
        ...common,
        "--preset",
        "fast",
        "--vae",
        "tiny",
        "--guided",
        "depth",
        "--annotator",
        TINY_ANNOTATOR,
      ],
      extras: true,
    },
    ...imageScenarios(),
    ...chunkScenarios(common),
  ];
  const only = v.only?.split(",").map((s) => s.trim());
  const chosen = only
    ? scenarios.filter((s, i) =>
      only.includes(String(i + 1)) || only.includes(s.name) ||
      (s.group !== undefined && only.includes(s.group))
    )
    : scenarios;
  const sets: Partial<Record<"fp32" | "fp16" | "derived", FullSet>> = {};
  const report: Record<string, unknown> = {
    date: new Date().toISOString(),
    machine: {
      cpus: navigator.hardwareConcurrency,
      memoryGB: Math.round(Deno.systemMemoryInfo().total / 2 ** 30),
      loadavg: Deno.loadavg(),
      os: Deno.build.os,
      deno: Deno.version.deno,
    },
    settings: { steps: Number(steps), size: Number(size), layersPerBlock: lpb },
    scenarios: {} as Record<string, unknown>,
  };
  if (only?.includes("models-add")) {
    // `models add` of a full-size fp16 checkpoint: its own models root, no set built here.
    const r = await runModelsAddBench();
    report.modelsAdd = r;
    const summary = `${(r.first.ms / 1000).toFixed(1)} s, peak RSS ${
      (r.first.peakRss / 1e9).toFixed(2)
    } GB (targets 120 s, 3 GB); again ${
      (r.second.ms / 1000).toFixed(1)
    } s, converted nothing: ${r.secondConvertedNothing}`;
    console.error(`models add, fp16 checkpoint: ${summary}`);
    if (only.length === 1) {
      const outPath = v.out ?? join(REPO, ".cache", "bench", "full.json");
      await Deno.mkdir(join(outPath, ".."), { recursive: true });
      await Deno.writeTextFile(outPath, JSON.stringify(report, null, 2));
      console.log(`models add (full-size fp16 checkpoint)\n    ${summary}\n\nJSON: ${outPath}`);
      return r.first.code === 0 && r.secondConvertedNothing ? 0 : 1;
    }
  }
  const exportDir = v["fresh-export"] ? resolve(v["fresh-export"]) : undefined;
  const exportOnly = exportDir !== undefined && only?.length === 1 && only[0] === "fresh-export";
  const fresh = !exportOnly &&
    (!only || only.includes("fresh") || chosen.some((s) => s.precision === "derived"));
  const want = new Set([
    ...chosen.map((s) => s.precision === "derived" ? "fp16" : s.precision),
    ...(only?.includes("startup") || !only ? ["fp32"] : []),
    ...(fresh || exportDir ? ["fp16"] : []),
  ]);
  for (const p of want as Set<"fp32" | "fp16">) {
    const t0 = performance.now();
    sets[p] = await buildFullSet({ precision: p, layersPerBlock: lpb });
    (report as Record<string, unknown>)[`set_${p}`] = {
      root: sets[p]!.root,
      reused: sets[p]!.reused,
      buildMs: Math.round(performance.now() - t0),
      bytes: Object.fromEntries(
        ["text_encoder", "unet", "vae_decoder"].map((c) => [
          c,
          sets[p]!.files.filter((f) => f.component === c && !f.path.startsWith("taesd/"))
            .reduce((a, f) => a + f.size, 0),
        ]),
      ),
      params: { built: sets[p]!.params, real: SD15_PARAMS },
    };
  }
  const rows: string[][] = [];
  if (fresh) {
    // What a fresh clone gets: derives the fp32 set the "derived" scenario runs on.
    const t0 = performance.now();
    const result = await runFreshDefaults(sets.fp16!, {
      layersPerBlock: lpb,
      reuse: v["fresh-reuse"] === true,
    });
    report.freshDefaults = { ...result.report, ms: Math.round(performance.now() - t0) };
    rows.push(...result.rows);
    console.error(result.rows.map((r) => r.join(" | ")).join("\n"));
    sets.derived = await derivedSet(join(benchCacheDir(), "fresh-defaults", "models"));
  }
  if (exportDir) {
    // The same scenario on another exporter's graphs (the fp16 set still supplies the
    // tokenizer, the scheduler and the files the lock's derived tables name).
    const t0 = performance.now();
    const result = await runFreshDefaults(sets.fp16!, {
      layersPerBlock: lpb,
      reuse: v["fresh-reuse"] === true,
      exportDir,
    });
    report.freshDefaultsExport = { ...result.report, ms: Math.round(performance.now() - t0) };
    rows.push(...result.rows);
    console.error(result.rows.map((r) => r.join(" | ")).join("\n"));
  }
  let extras: FullExtras | undefined;
  if (chosen.some((s) => s.extras)) {
    const t0 = performance.now();
    extras = await buildFullExtras(sets.fp32!);
    report.extras = { ...extras, buildMs: Math.round(performance.now() - t0) };
  }
  for (const s of chosen) {
    const set = sets[s.precision]!;
    const args = s.args.map((a) => a === "$LORA" ? join(set.root, extras!.lora) : a);
    const r = await runScenario(set, { ...s, args });
    (report.scenarios as Record<string, unknown>)[s.name] = r;
    if ("error" in r) {
      rows.push([s.name, r.error]);
      continue;
    }
    // The VAE encoder is opened only by the image scenarios.
    const files = set.files.filter((f) =>
      f.component !== "tokenizer" && f.component !== "scheduler" &&
      (s.runner !== undefined || !f.path.startsWith("sd15/vae_encoder/"))
    )
      .filter((f) =>
        r.options.vae === "tiny"
          ? !f.path.startsWith("sd15/vae_decoder")
          : !f.path.startsWith("taesd/")
      )
      .reduce((a, f) =>
        a + f.size, 0) +
      (s.extras ? await extraBytes(set, extras!, r.options.guided === "depth") : 0);
    const g = r.generations.at(-1)!;
    const unet = r.runs.unet ?? r.runs.controlnet_unet ?? [];
    // With a LoRA the UNet session is opened by the LoRA merge, not the timing opener.
    const untimed = unet.length === 0;
    rows.push([
      s.name,
      `load ${fmtMs(r.loadMs)}`,
      `image ${fmtMs(median(r.generations.map((x) => x.totalMs)))}`,
      `UNet step ${fmtMs(median(unet))} (${fmtMs(Math.min(...unet))}–${
        fmtMs(Math.max(...unet))
      }, n=${unet.length})`,
      `text ${fmtMs(median(r.runs.text_encoder ?? []))}, n=${(r.runs.text_encoder ?? []).length}`,
      ...(r.runs.controlnet
        ? [
          `ControlNet ${fmtMs(median(r.runs.controlnet))}, n=${r.runs.controlnet.length}`,
        ]
        : []),
      ...(r.runs.vae_encoder
        ? [`VAE encode ${fmtMs(median(r.runs.vae_encoder))}, n=${r.runs.vae_encoder.length}`]
        : []),
      `VAE ${fmtMs(median(r.runs.vae_decoder ?? []))}`,
      untimed
        ? "overhead n/a (UNet untimed)"
        : `overhead ${(100 * (g.totalMs - g.sessionMs) / g.totalMs).toFixed(2)} %`,
      `peak RSS ${(r.sampledPeakRss / GB).toFixed(2)} GB = ${
        (r.sampledPeakRss / files).toFixed(2)
      }× files (${(files / GB).toFixed(2)} GB)`,
      `RSS after runs ${(r.rssAfterRuns / GB).toFixed(2)} GB`,
      ...Object.entries(r.stages).map(([k, xs]) => `${k} ${median(xs).toFixed(2)} ms`),
    ]);
    console.error(rows.at(-1)!.join(" | "));
  }
  const results = report.scenarios as Record<string, RunReport | { error: string }>;
  const def = results[scenarios[0].name];
  const fast = results[scenarios[1].name];
  if (def && fast && !("error" in def) && !("error" in fast)) {
    const est = estimateDefault(def);
    const fastMs = median(fast.generations.map((g) => g.totalMs));
    // With --steps 25 the default image is measured whole; else extrapolated from the calls.
    const measuredMs = Number(steps) >= 25 ? median(def.generations.map((g) => g.totalMs)) : null;
    report.defaultVsFast = {
      ...est,
      measuredMs,
      fastMs,
      ratioMin: est.minMs / fastMs,
      ratioMedian: est.medianMs / fastMs,
      ratioMeasured: measuredMs === null ? null : measuredMs / fastMs,
    };
    rows.push(
      measuredMs === null
        ? [
          "default 25-step image (extrapolated) vs fast preset (measured)",
          `default ${fmtMs(est.minMs)} (least-contended UNet call) … ${
            fmtMs(est.medianMs)
          } (median)`,
          `fast ${fmtMs(fastMs)}`,
          `fast is ${(est.minMs / fastMs).toFixed(1)}× … ${
            (est.medianMs / fastMs).toFixed(1)
          }× faster`,
        ]
        : [
          "default 25-step image vs fast preset (both measured)",
          `default ${fmtMs(measuredMs)}`,
          `fast ${fmtMs(fastMs)}`,
          `fast is ${(measuredMs / fastMs).toFixed(1)}× faster`,
        ],
    );
  }
  const upscale = upscaleEstimates(results, scenarios[0].name, scenarios[1].name);
  if (upscale) {
    report.upscaleEstimates = upscale;
    rows.push([
      "1024×1024 upscale (9 tiles, strength 0.3), estimated from the calls measured above",
      ...upscale.map((e) =>
        `${e.preset}: ${
          fmtMs(e.totalMs)
        } (${e.unetCallsPerTile} UNet call(s) + encode + decode per tile, ${fmtMs(e.perTileMs)})`
      ),
    ]);
  }
  if (!only || only.includes("startup")) {
    const st = await startup(sets.fp32!);
    report.startup = st;
    rows.push(["start-up (real server, fast sampling, tiny VAE)", JSON.stringify(st)]);
  }
  const outPath = v.out ?? join(REPO, ".cache", "bench", "full.json");
  await Deno.mkdir(join(outPath, ".."), { recursive: true });
  await Deno.writeTextFile(outPath, JSON.stringify(report, null, 2));
  console.log(rows.map((r) => r.join("\n    ")).join("\n"));
  console.log(`\nJSON: ${outPath}`);
  return 0;
}

if (import.meta.main) Deno.exit(await runFullBench(Deno.args));
