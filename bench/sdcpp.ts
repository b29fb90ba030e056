/**
 * stable-diffusion.cpp for the peer comparison: built from a source checkout
 * (`--sdcpp-src DIR`, a `git clone --recursive` of
 * https://github.com/leejet/stable-diffusion.cpp at a release tag, its
 * `ggml` submodule included) with the system's CMake and C++ compiler, its
 * ggml CPU backend with the build machine's own instruction set
 * (`-DGGML_NATIVE=ON`: `-march=native`), Release, into a build folder under
 * the repository's `.cache/peers/sdcpp-build/` (ignored by git; nothing of
 * the peer is committed). A later run rebuilds only what changed; another
 * checkout is configured afresh.
 *
 * @module
 */

import { join, resolve } from "node:path";
import { cpuShareBetween, runSampled, type SampledRun } from "./proc_sampler.ts";

/** The `sd-cli` binary and how it was built. */
export interface SdcppBuild {
  /** Absolute path of `sd-cli`. */
  binary: string;
  /** The build folder. */
  buildDir: string;
  /** `git describe --tags` of the checkout, or "unknown" outside git. */
  version: string;
  /** The configure and build commands, as run. */
  commands: string[];
  /** ms the configure and build took (a no-op rebuild: seconds). */
  ms: number;
}

async function run(cmd: string, args: string[], cwd?: string) {
  try {
    const out = await new Deno.Command(cmd, { args, cwd, stdout: "piped", stderr: "piped" })
      .output();
    const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
    return { ok: out.success, text };
  } catch (e) {
    return { ok: false, text: (e as Error).message };
  }
}

const exists = (p: string) => Deno.stat(p).then(() => true, () => false);

/**
 * Checks the checkout: stable-diffusion.cpp's and ggml's CMake files, and the
 * tools. Returns a message a person can act on, or null when all is there.
 */
export async function checkSdcppSource(src: string): Promise<string | null> {
  if (!(await exists(join(src, "CMakeLists.txt"))) || !(await exists(join(src, "src")))) {
    return `${src} is not a stable-diffusion.cpp checkout (no CMakeLists.txt and src/)`;
  }
  if (!(await exists(join(src, "ggml", "CMakeLists.txt")))) {
    return `${src}/ggml is empty: the ggml submodule is missing (clone with --recursive, or run ` +
      `git submodule update --init ggml in the checkout)`;
  }
  for (const tool of ["cmake", "c++"]) {
    if (!(await run(tool, ["--version"])).ok) {
      return `${tool} is not installed (Debian: apt-get install cmake g++)`;
    }
  }
  return null;
}

/**
 * Configures (once) and builds `sd-cli` from `src` under `cacheDir`, niced so
 * that a build on a shared machine yields to others; returns the binary.
 * Throws with the build's last lines when it fails.
 */
export async function buildSdcpp(src: string, cacheDir: string): Promise<SdcppBuild> {
  src = resolve(src);
  const buildDir = join(cacheDir, "sdcpp-build");
  const jobs = String(navigator.hardwareConcurrency || 2);
  const configure = [
    "-S",
    src,
    "-B",
    buildDir,
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=ON",
    "-DSD_BUILD_SHARED_LIBS=OFF",
  ];
  const build = ["--build", buildDir, "--config", "Release", "-j", jobs, "--target", "sd-cli"];
  const nice = (await run("nice", ["--version"])).ok;
  const wrap = (args: string[]) =>
    (nice ? ["nice", ["-n", "10", "cmake", ...args]] : ["cmake", args]) as [string, string[]];
  const t0 = performance.now();
  const commands: string[] = [];
  // One build folder; configured anew when it was configured for another checkout.
  const cache = await Deno.readTextFile(join(buildDir, "CMakeCache.txt")).catch(() => "");
  const home = /^CMAKE_HOME_DIRECTORY:INTERNAL=(.*)$/m.exec(cache)?.[1];
  if (home !== src) {
    await Deno.remove(buildDir, { recursive: true }).catch(() => {});
    const [c, a] = wrap(configure);
    commands.push([c, ...a].join(" "));
    const r = await run(c, a);
    if (!r.ok) throw new Error(`configuring stable-diffusion.cpp failed:\n${r.text.slice(-2000)}`);
  }
  const [c, a] = wrap(build);
  commands.push([c, ...a].join(" "));
  const r = await run(c, a);
  if (!r.ok) throw new Error(`building stable-diffusion.cpp failed:\n${r.text.slice(-3000)}`);
  const binary = join(buildDir, "bin", "sd-cli");
  if (!(await exists(binary))) throw new Error(`the build wrote no ${binary}`);
  const described = await run("git", ["-C", src, "describe", "--tags", "--always", "--dirty"]);
  // A checkout inside another repository would describe that one: only its own .git counts.
  const version = described.ok && (await exists(join(src, ".git")))
    ? described.text.trim()
    : "unknown";
  return { binary, buildDir, version, commands, ms: Math.round(performance.now() - t0) };
}

/**
 * Runs `sd-cli` text-to-image: `images` images in one process (`-b`), seed
 * 42 onwards, `threads` threads, the LoRA named in the prompt from
 * `loraDir`, TAESD as the VAE (`--taesd`). `sampler` and `steps` pick the
 * path; `--cfg-scale 1` is no classifier-free guidance (one UNet call per
 * step). Its CPU share is taken from the first image's sampling end to the
 * process's end (the steady images and the decodes).
 */
export async function runSdcpp(options: {
  binary: string;
  checkpoint: string;
  taesd: string;
  loraDir: string;
  loraName: string;
  prompt: string;
  sampler: string;
  steps: number;
  size: number;
  images: number;
  threads: number;
  outDir: string;
}): Promise<SampledRun & { args: string[]; cpuShare: number | null }> {
  const o = options;
  await Deno.mkdir(o.outDir, { recursive: true });
  const args = [
    "-m",
    o.checkpoint,
    "--taesd",
    o.taesd,
    "--lora-model-dir",
    o.loraDir,
    "-p",
    `${o.prompt}<lora:${o.loraName}:1>`,
    "--sampling-method",
    o.sampler,
    "--steps",
    String(o.steps),
    "--cfg-scale",
    "1",
    "-W",
    String(o.size),
    "-H",
    String(o.size),
    "-s",
    "42",
    "-b",
    String(o.images),
    "-t",
    String(o.threads),
    "-o",
    join(o.outDir, `${o.sampler}-${o.steps}.png`),
  ];
  const run = await runSampled(o.binary, args);
  const firstDone = run.lines.find((l) => /sampling completed/.test(l.text));
  const cpuShare = firstDone ? cpuShareBetween(run.samples, run.t0 + firstDone.t, Infinity) : null;
  return { ...run, args, cpuShare };
}
