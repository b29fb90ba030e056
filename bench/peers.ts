/**
 * The peers scenario of `deno task bench --full` (`--only peers`): the
 * project against what a user would run instead on the same machine,
 * stable-diffusion.cpp (ggml, CPU) and diffusers (PyTorch, CPU), on the same
 * full-size random-weight SD 1.5, prompt, size, seed and steps, for the
 * 4-step LCM path (the `fast` preset) and the 1-step path (the `turbo`
 * preset where this build has it, else `fast` at `steps = 1`). It reports
 * seconds per UNet call, per image, the first image, start-up, peak RSS and
 * the CPU share of each, with the ratio project ÷ peer. Nothing in the test
 * suite times it.
 *
 * One set of weights for all three: `diffusers_export.py` exports the seeded
 * SD 1.5 of `sd15_torch.py` with diffusers' own export script (the project's
 * fp32 set; `--fresh-export DIR` uses an export already written),
 * `peers_convert.py` writes the same weights as the single-file checkpoint
 * stable-diffusion.cpp loads (checked tensor by tensor against the export),
 * and `peers_diffusers.py` builds them again from the seed. The TAESD
 * decoder and the LCM-shaped LoRA are the project's stand-ins from its
 * fresh-defaults layout, given to each peer in its own format.
 *
 * The project runs its fresh-defaults path (`fresh.ts`: the repository's
 * config.toml, `deno task models`, the real server over stdio); the peers run
 * with as many threads as this process may use (`--peers-threads N`
 * overrides). Everything is written under the bench cache's `peers/` folder
 * and the repository's `.cache/peers/` (the stable-diffusion.cpp build);
 * nothing of the peers is committed.
 *
 * @module
 */

import { dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { createHash } from "node:crypto";
import { PRESETS } from "../mod/config/mod.ts";
import { processAlive } from "../mod/lora/mod.ts";
import { ClipTokenizer } from "../mod/tokenizer/mod.ts";
import { benchCacheDir, buildFullSet, FULL_SET_VERSION } from "./full_models.ts";
import { freshConfig, layout, runModels, spawnServer } from "./fresh.ts";
import { cpuShareBetween, runSampled, sampleProc } from "./proc_sampler.ts";
import {
  type DiffusersImage,
  diffusersSide,
  parseSdcppLog,
  type PathRun,
  peersTable,
  type ProjectImage,
  projectSide,
  sdcppSide,
  type SideRun,
} from "./peers_report.ts";
import { buildSdcpp, checkSdcppSource, runSdcpp, type SdcppBuild } from "./sdcpp.ts";

const REPO = fileURLToPath(new URL("../", import.meta.url));
const BENCH = join(REPO, "mod", "bench");
/** The prompt every runtime gets (the other scenarios' prompt). */
const PROMPT = "a lighthouse";
/** Where the fresh-defaults layout keeps the stand-ins the peers are given (models.lock paths). */
const TAESD_STAND_IN = "taesd/taesd_decoder.safetensors";
const LORA_STAND_IN = "lora/lcm-lora-sdv1-5/pytorch_lora_weights.safetensors";
/** How to get the sources, for the messages. */
export const SDCPP_CLONE =
  "git clone --branch master-827-97d2990 --recursive https://github.com/leejet/stable-diffusion.cpp DIR";
export const DIFFUSERS_CLONE =
  "git clone --branch v0.27.2 --depth 1 https://github.com/huggingface/diffusers DIR";

/** The flags of the peers scenario, which `deno task bench --full` passes on to it. */
const PEERS_FLAGS = [
  "sdcpp-src",
  "diffusers-src",
  "python",
  "peers-images",
  "peers-threads",
  "peers-out",
];

/** {@link splitPeersArgs}'s answer. */
export interface PeersArgs {
  /** The peers scenario's flags (and the shared `--size`, `--lpb`, `--fresh-export`). */
  peers: string[];
  /** The other scenarios' flags, `peers` taken out of `--only`. */
  rest: string[];
  /** Whether the peers scenario runs. */
  runPeers: boolean;
  /** Whether `--only` named it (missing sources then fail the run). */
  peersNamed: boolean;
  /** Whether any other scenario runs. */
  runOthers: boolean;
}

/**
 * Splits `deno task bench --full` arguments: the peers scenario's own flags,
 * and the rest for the other scenarios with `peers` taken out of `--only`.
 * `runPeers`: no `--only`, or `--only` names peers (`peersNamed`);
 * `runOthers`: no `--only`, or it names something else too.
 */
export function splitPeersArgs(args: readonly string[]): PeersArgs {
  const peers: string[] = [];
  const rest: string[] = [];
  let only: string[] | undefined;
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    const [flag, inline] = a.startsWith("--") ? a.slice(2).split(/=(.*)/s, 2) : [""];
    const value = () => (inline !== undefined ? inline : args[++i]);
    if (PEERS_FLAGS.includes(flag)) peers.push(`--${flag}`, value() ?? "");
    else if (flag === "only") {
      only = (value() ?? "").split(",").map((s) => s.trim()).filter(Boolean);
    } else if (flag === "fresh-export" || flag === "size" || flag === "lpb") {
      const v = value() ?? "";
      peers.push(`--${flag}`, v);
      rest.push(`--${flag}`, v);
    } else rest.push(a);
  }
  const others = only?.filter((s) => s !== "peers");
  if (others && others.length > 0) rest.push("--only", others.join(","));
  return {
    peers,
    rest,
    runPeers: only === undefined || only.includes("peers"),
    peersNamed: only?.includes("peers") ?? false,
    runOthers: only === undefined || (others?.length ?? 0) > 0,
  };
}

async function sha256Files(paths: string[]): Promise<string> {
  const h = createHash("sha256");
  for (const p of paths) h.update(await Deno.readFile(p));
  return h.digest("hex");
}

async function readStamp(dir: string): Promise<string> {
  return await Deno.readTextFile(join(dir, ".peers-stamp.json")).catch(() => "");
}

const exists = (p: string) => Deno.stat(p).then(() => true, () => false);

async function run(cmd: string, args: string[], cwd = REPO) {
  try {
    const out = await new Deno.Command(cmd, { args, cwd, stdout: "piped", stderr: "piped" })
      .output();
    return {
      ok: out.success,
      stdout: new TextDecoder().decode(out.stdout),
      stderr: new TextDecoder().decode(out.stderr),
    };
  } catch (e) {
    return { ok: false, stdout: "", stderr: (e as Error).message };
  }
}

/** The diffusers version a checkout declares (`src/diffusers/__init__.py`). */
async function diffusersVersion(src: string): Promise<string | null> {
  const text = await Deno.readTextFile(join(src, "src/diffusers/__init__.py")).catch(() => "");
  return /__version__\s*=\s*"([^"]+)"/.exec(text)?.[1] ?? null;
}

/** What the scenario needs from Python and the diffusers checkout, or a message saying what is missing. */
async function checkPython(python: string, diffusersSrc: string): Promise<string | null> {
  const r = await run(python, ["-c", "import torch, onnx, numpy, PIL; print(torch.__version__)"]);
  if (!r.ok) {
    return `${python} cannot import torch, onnx, numpy and PIL (Debian: apt-get install ` +
      `python3-torch python3-onnx python3-numpy python3-pil): ${
        r.stderr.trim().split("\n").at(-1)
      }`;
  }
  for (
    const f of [
      "src/diffusers/schedulers/scheduling_tcd.py",
      "scripts/convert_stable_diffusion_checkpoint_to_onnx.py",
      "scripts/convert_diffusers_to_original_stable_diffusion.py",
    ]
  ) {
    if (!(await exists(join(diffusersSrc, f)))) {
      return `${diffusersSrc} lacks ${f}: the scenario needs a diffusers checkout of v0.27 or later ` +
        `(TCDScheduler), e.g. ${DIFFUSERS_CLONE}`;
    }
  }
  return null;
}

/**
 * The project's fp32 set: `--fresh-export DIR` as given, else the diffusers
 * script's export of `sd15_torch.py`'s weights, written once into the cache
 * (about 3 minutes and 10 GB of memory on 2 cores) and rewritten when the
 * scripts or the diffusers version change. Returns the folder and its stamp.
 */
async function projectExport(
  cache: string,
  python: string,
  diffusersSrc: string,
  log: (m: string) => void,
  given?: string,
): Promise<{ dir: string; stamp: string; ms: number; reused: boolean }> {
  if (given) {
    const info = await Deno.stat(join(given, "unet", "weights.pb")).catch(() => null);
    return {
      dir: given,
      stamp: JSON.stringify({ given, size: info?.size, mtime: info?.mtime?.toISOString() }),
      ms: 0,
      reused: true,
    };
  }
  const dir = join(cache, "export");
  const stamp = JSON.stringify({
    export: 1,
    scripts: await sha256Files(
      ["diffusers_export.py", "diffusers_offline.py"].map((f) => join(BENCH, f)),
    ),
    diffusers: await diffusersVersion(diffusersSrc),
  });
  if ((await readStamp(dir)) === stamp) return { dir, stamp, ms: 0, reused: true };
  log(
    `writing the export with diffusers' script into ${dir} (about 3 minutes and 10 GB on 2 cores)`,
  );
  const t0 = performance.now();
  await Deno.remove(dir, { recursive: true }).catch(() => {});
  const r = await run(python, [join(BENCH, "diffusers_export.py"), resolve(diffusersSrc), dir]);
  if (!r.ok) throw new Error(`diffusers_export.py failed: ${r.stderr.trim().slice(-1500)}`);
  await Deno.writeTextFile(join(dir, ".peers-stamp.json"), stamp);
  return { dir, stamp, ms: Math.round(performance.now() - t0), reused: false };
}

/** Writes (or reuses) stable-diffusion.cpp's files of the same weights; the converter's report. */
async function sdcppModels(
  cache: string,
  python: string,
  diffusersSrc: string,
  exportDir: string,
  exportStamp: string,
  taesdDecoder: string,
): Promise<{ dir: string; report: Record<string, unknown>; ms: number }> {
  const dir = join(cache, "sdcpp-models");
  const stamp = JSON.stringify({
    convert: 1,
    export: exportStamp,
    taesd: await sha256Files([taesdDecoder]),
    scripts: await sha256Files(
      ["peers_convert.py", "sd15_torch.py", "safetensors_np.py"].map((f) => join(BENCH, f)),
    ),
  });
  const previous = await readStamp(dir);
  if (previous.startsWith(stamp)) {
    return { dir, report: JSON.parse(previous.slice(stamp.length)), ms: 0 };
  }
  const t0 = performance.now();
  await Deno.remove(dir, { recursive: true }).catch(() => {});
  const r = await run(python, [
    join(BENCH, "peers_convert.py"),
    resolve(diffusersSrc),
    exportDir,
    taesdDecoder,
    dir,
  ]);
  const last = r.stdout.trim().split("\n").at(-1) ?? "";
  if (!r.ok || !last.startsWith("{")) {
    throw new Error(`peers_convert.py failed: ${(r.stderr || r.stdout).trim().slice(-1500)}`);
  }
  await Deno.writeTextFile(join(dir, ".peers-stamp.json"), stamp + last);
  return { dir, report: JSON.parse(last), ms: Math.round(performance.now() - t0) };
}

/**
 * The project's server on `config` over stdio: spawn to the `tools/list`
 * reply, then `images` images of the prompt with each step's progress
 * notification timed; peak RSS and the CPU share of the steady images.
 */
async function serveProject(config: string, images: number, size: number) {
  const t0 = performance.now();
  const { transport, client, stderr } = spawnServer(config, "bench-peers");
  await client.connect(transport);
  const sampler = sampleProc(transport.pid!);
  const out: ProjectImage[] = [];
  const windows: Array<[number, number]> = [];
  let startupMs = NaN;
  let error: string | undefined;
  try {
    await client.listTools(undefined, { timeout: 1_800_000 });
    startupMs = performance.now() - t0;
    for (let i = 0; i < images; i++) {
      const progress: number[] = [];
      const s = performance.now();
      const r = await client.callTool(
        {
          name: "generate_image",
          arguments: {
            positive_prompt: PROMPT,
            size: size === 512 ? "square_512" : `${size}x${size}`,
          },
        },
        undefined,
        { timeout: 1_800_000, onprogress: () => progress.push(performance.now() - s) },
      );
      const e = performance.now();
      const image = (r.content as Array<{ type: string }>).some((c) => c.type === "image");
      if (r.isError || !image) {
        error = JSON.stringify(r.content).slice(0, 300);
        break;
      }
      out.push({ ms: e - s, progress });
      windows.push([s, e]);
    }
  } catch (e) {
    error = (e as Error).message;
  } finally {
    const pid = transport.pid;
    await client.close();
    // The next runtime must not overlap this one: up to [server] shutdown_grace_seconds and a margin.
    const until = Date.now() + 150_000;
    while (pid && Date.now() < until && await processAlive(pid)) {
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  const { samples, peakRss } = await sampler.stop();
  const st = windows.length > 1 ? windows.slice(1) : windows;
  const cpuShare = st.length ? cpuShareBetween(samples, st[0][0], st.at(-1)![1]) : null;
  return {
    startupMs,
    images: out,
    peakRss,
    cpuShare,
    error,
    stderr: error ? stderr().slice(-800) : "",
  };
}

/** The scenario's options, from its flags. */
interface PeersOptions {
  sdcppSrc?: string;
  diffusersSrc?: string;
  python: string;
  images: number;
  threads: number;
  exportDir?: string;
  size: number;
  lpb: number;
  out: string;
}

function options(args: readonly string[]): PeersOptions {
  const { values: v } = parseArgs({
    args: [...args],
    options: {
      "sdcpp-src": { type: "string" },
      "diffusers-src": { type: "string" },
      python: { type: "string", default: "/usr/bin/python3" },
      "peers-images": { type: "string", default: "3" },
      "peers-threads": { type: "string" },
      "peers-out": { type: "string" },
      "fresh-export": { type: "string" },
      size: { type: "string", default: "512" },
      lpb: { type: "string", default: "2" },
    },
  });
  return {
    sdcppSrc: v["sdcpp-src"] ? resolve(v["sdcpp-src"]) : undefined,
    diffusersSrc: v["diffusers-src"] ? resolve(v["diffusers-src"]) : undefined,
    python: v.python!,
    images: Math.max(1, Number(v["peers-images"])),
    threads: Number(v["peers-threads"] ?? navigator.hardwareConcurrency ?? 2),
    exportDir: v["fresh-export"] ? resolve(v["fresh-export"]) : undefined,
    size: Number(v.size),
    lpb: Number(v.lpb),
    out: v["peers-out"] ?? join(REPO, ".cache", "bench", "peers.json"),
  };
}

/** The two paths: steps and samplers per runtime, and the project's config edits. */
function paths() {
  const turbo = "turbo" in PRESETS;
  return [
    {
      name: "4-step LCM",
      steps: 4,
      project: {
        config: "fast preset (LCM LoRA merged, lcm, 4 steps, no CFG, TAESD, fp32)",
        edits: [{ section: "generation", key: "preset", value: '"fast"' }],
      },
      sdcpp: "lcm",
      diffusers: { scheduler: "lcm", guidance: 1 },
    },
    {
      name: "1-step",
      steps: 1,
      project: turbo
        ? {
          config: "turbo preset (1 step, tcd, no CFG, TAESD, fp32)",
          edits: [{ section: "generation", key: "preset", value: '"turbo"' }],
        }
        : {
          config: "fast preset at steps = 1 (lcm; this build has no turbo preset)",
          edits: [
            { section: "generation", key: "preset", value: '"fast"' },
            { section: "generation", key: "steps", value: "1" },
          ],
        },
      sdcpp: "tcd",
      diffusers: { scheduler: "tcd", guidance: 0 },
    },
  ];
}

/** A side that could not run, with the reason. */
function notRun(side: string, config: string, error: string): SideRun {
  return {
    side,
    config,
    unetCallMs: [],
    imageMs: [],
    firstImageMs: null,
    startupMs: null,
    peakRss: 0,
    cpuShare: null,
    notes: [],
    error,
  };
}

const lastLines = (lines: { text: string }[], n = 6) =>
  lines.map((l) => l.text).filter((t) => t.trim()).slice(-n).join(" | ");

/**
 * Runs the peers scenario with its command-line `args`; writes JSON, prints
 * the table; returns the exit code. With `implicit` (a whole
 * `deno task bench --full`, no `--only`), missing sources or Python packages
 * are reported and skipped with exit code 0; asked for by name, they fail it.
 */
export async function runPeersBench(
  args: readonly string[],
  implicit = false,
): Promise<number> {
  const o = options(args);
  const missing = (message: string) => {
    console.error(`peers: ${implicit ? "skipped: " : ""}${message}`);
    return implicit ? 0 : 1;
  };
  const t0 = performance.now();
  const log = (m: string) => console.error(`peers: ${m}`);
  const report: Record<string, unknown> = {
    date: new Date().toISOString(),
    machine: {
      cpus: navigator.hardwareConcurrency,
      model: /model name\s*:\s*(.*)/.exec(await Deno.readTextFile("/proc/cpuinfo").catch(() => ""))
        ?.[1],
      memoryGB: Math.round(Deno.systemMemoryInfo().total / 2 ** 30),
      loadavgBefore: Deno.loadavg(),
      deno: Deno.version.deno,
    },
    settings: { prompt: PROMPT, size: o.size, images: o.images, peerThreads: o.threads, seed: 42 },
  };
  if (!o.diffusersSrc) {
    return missing(
      `needs --diffusers-src DIR, a diffusers checkout (v0.27 or later): ${DIFFUSERS_CLONE}; ` +
        `and --sdcpp-src DIR for stable-diffusion.cpp: ${SDCPP_CLONE}. See docs/performance.md, "Peers".`,
    );
  }
  const pythonProblem = await checkPython(o.python, o.diffusersSrc);
  if (pythonProblem) return missing(pythonProblem);
  const cache = join(benchCacheDir(), "peers");
  await Deno.mkdir(cache, { recursive: true });

  // stable-diffusion.cpp first: a build problem shows before the long preparation.
  let build: SdcppBuild | undefined;
  let sdcppProblem: string | undefined = o.sdcppSrc
    ? (await checkSdcppSource(o.sdcppSrc)) ?? undefined
    : `--sdcpp-src DIR not given (${SDCPP_CLONE})`;
  if (!sdcppProblem) {
    log(`building stable-diffusion.cpp from ${o.sdcppSrc} (a first build takes many minutes)`);
    try {
      build = await buildSdcpp(o.sdcppSrc!, join(REPO, ".cache", "peers"));
      report.sdcpp = build;
    } catch (e) {
      sdcppProblem = (e as Error).message;
    }
  }

  log("the project's models: the fp16 set, the export, the fresh-defaults layout");
  const fp16 = await buildFullSet({ precision: "fp16", layersPerBlock: o.lpb });
  const exp = await projectExport(cache, o.python, o.diffusersSrc, log, o.exportDir);
  report.export = { dir: exp.dir, ms: exp.ms, reused: exp.reused };
  const dir = join(cache, "project");
  // standIns 2: the turbo preset's LoRA is laid out too.
  const layoutStamp = JSON.stringify({
    export: exp.stamp,
    fp16: FULL_SET_VERSION,
    lpb: o.lpb,
    standIns: 2,
  });
  const reuse = (await readStamp(dir)) === layoutStamp;
  const lock = await layout(fp16, dir, 1234, o.lpb, reuse, exp.dir);
  await Deno.writeTextFile(join(dir, ".peers-stamp.json"), layoutStamp);
  const root = join(dir, "models");
  const tokenizer = await ClipTokenizer.load(join(root, "sd15-fp32", "tokenizer"));
  const encoding = tokenizer.encode(PROMPT);
  const ids = [...encoding.ids.slice(0, encoding.tokenCount + 2)];

  log("stable-diffusion.cpp's files of the same weights (once: a few minutes, about 9 GB)");
  const converted = await sdcppModels(
    cache,
    o.python,
    o.diffusersSrc,
    exp.dir,
    exp.stamp,
    join(root, TAESD_STAND_IN),
  );
  report.sdcppModels = { ...converted.report, ms: converted.ms };

  const results: PathRun[] = [];
  for (const path of paths()) {
    const sides: SideRun[] = [];
    // The project: its fresh-defaults path on this preset.
    const config = await freshConfig(dir, lock, `peers-${path.steps}.toml`, path.project.edits);
    log(`${path.name}: deno task models, then the project's server`);
    const models = await runModels(config);
    if (models.code !== 0) {
      sides.push(
        notRun("project", path.project.config, `deno task models: ${models.log.join(" | ")}`),
      );
    } else {
      const served = await serveProject(config, o.images, o.size);
      sides.push(
        served.error
          ? notRun("project", path.project.config, `${served.error} ${served.stderr}`)
          : projectSide(served, path.project.config),
      );
    }
    // stable-diffusion.cpp.
    const sdConfig = `sd-cli ${build?.version ?? ""}, ${path.sdcpp}, ${path.steps} step(s), ` +
      `--cfg-scale 1, TAESD, fp32, -t ${o.threads}`;
    if (sdcppProblem || !build) {
      sides.push(notRun("stable-diffusion.cpp", sdConfig, sdcppProblem ?? "not built"));
    } else {
      log(`${path.name}: stable-diffusion.cpp`);
      const r = await runSdcpp({
        binary: build.binary,
        checkpoint: join(converted.dir, "sd15.safetensors"),
        taesd: join(converted.dir, "taesd.safetensors"),
        loraDir: dirname(join(root, LORA_STAND_IN)),
        loraName: "pytorch_lora_weights",
        prompt: PROMPT,
        sampler: path.sdcpp,
        steps: path.steps,
        size: o.size,
        images: o.images,
        threads: o.threads,
        outDir: join(cache, "out"),
      });
      const parsed = parseSdcppLog(r.lines);
      sides.push(
        r.code !== 0 || parsed.samplingMs.length === 0
          ? notRun("stable-diffusion.cpp", sdConfig, `exit ${r.code}: ${lastLines(r.lines)}`)
          : sdcppSide(parsed, r, sdConfig),
      );
    }
    // diffusers.
    const version = await diffusersVersion(o.diffusersSrc);
    const dfConfig =
      `diffusers ${version}, torch, ${path.diffusers.scheduler}, ${path.steps} step(s), ` +
      `guidance ${path.diffusers.guidance}, AutoencoderTiny, fp32, ${o.threads} threads`;
    log(`${path.name}: diffusers`);
    const r = await runSampled(o.python, [
      join(BENCH, "peers_diffusers.py"),
      o.diffusersSrc,
      "--export",
      exp.dir,
      "--taesd",
      join(converted.dir, "taesd.safetensors"),
      "--lora",
      join(root, LORA_STAND_IN),
      "--ids",
      ids.join(","),
      "--scheduler",
      path.diffusers.scheduler,
      "--steps",
      String(path.steps),
      "--guidance",
      String(path.diffusers.guidance),
      "--images",
      String(o.images),
      "--threads",
      String(o.threads),
      "--size",
      String(o.size),
      "--prompt",
      PROMPT,
    ]);
    const events = r.lines.filter((l) => l.text.startsWith('{"event"')).map((l) => ({
      ...JSON.parse(l.text) as { event: string; checkMs?: number } & DiffusersImage,
      t: l.t,
    }));
    const ready = events.find((e) => e.event === "ready");
    // Its check of the weights against the export is the bench's, not a start-up cost.
    const readyAt = ready ? ready.t - (ready.checkMs ?? 0) : null;
    const images = events.filter((e) => e.event === "image");
    sides.push(
      r.code !== 0 || images.length === 0
        ? notRun("diffusers", dfConfig, `exit ${r.code}: ${lastLines(r.lines)}`)
        : diffusersSide({ readyAt, images, peakRss: r.peakRss }, dfConfig),
    );
    results.push({ name: path.name, sides });
    console.error(peersTable([results.at(-1)!]).join("\n"));
  }
  report.paths = results;
  (report.machine as Record<string, unknown>).loadavgAfter = Deno.loadavg();
  report.ms = Math.round(performance.now() - t0);
  await Deno.mkdir(dirname(o.out), { recursive: true });
  await Deno.writeTextFile(o.out, JSON.stringify(report, null, 2));
  console.log(peersTable(results).join("\n"));
  console.log(`\nJSON: ${o.out} (${(report.ms as number / 60_000).toFixed(1)} min)`);
  return 0;
}
