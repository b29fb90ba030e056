/**
 * `deno task bench`: the Deno benchmarks (`deno bench`, test-sized models),
 * or with `--full` the full-size benchmark (`full.ts`; not a test).
 *
 * @module
 */

import { type Help, printHelp, wantsHelp } from "../cli/mod.ts";
import { runFullBench } from "./full.ts";
import { runDiffusersCheck } from "./full_diffusers.ts";

const HELP: Help = {
  usage: [
    "deno task bench [DENO BENCH FLAGS] [FILES]",
    "deno task bench --full [--steps N] [--size S] [--only A,B] [--lpb N] [--out FILE] " +
    "[--fresh-reuse] [--fresh-export DIR]",
    "deno task bench --diffusers-check --export DIR --diffusers SRC --tcd SRC [--runs turbo-1,turbo-2,fast-4] " +
    "[--eta E] [--seed N] [--python PATH] [--out FILE]",
  ],
  summary: "Benchmarks: speed and memory targets are measured by them, never in tests. Without " +
    "--full: the Deno benchmarks on the test-sized models (deno bench; its flags and files pass " +
    "through, e.g. --filter NAME). With --full: the full-size SD 1.5 benchmark, which builds " +
    "gigabyte model sets outside the repository (~/.cache/generate-image-sd15-mcp, " +
    "$SD_MCP_BENCH_CACHE overrides) and takes many minutes; results " +
    "in docs/performance.md.",
  options: [
    ["--full", "run the full-size benchmark instead of deno bench"],
    [
      "--steps N",
      "full: UNet steps of the default-preset scenario (default 2; its 25-step time is " +
      "extrapolated from the per-step median; 25 measures the whole image)",
    ],
    ["--size S", "full: image side in pixels (default 512)"],
    [
      "--only A,B",
      "full: only these scenarios, by number (1-based, as listed) or name; `fresh` = the " +
      "fresh-defaults scenario (the shipped config.toml and models.lock over full-size " +
      "stand-ins), `startup` = the start-up run",
    ],
    ["--lpb N", "full: a reduced-depth UNet (layers per block), for development"],
    [
      "--out FILE",
      "full: where the JSON results go (default .cache/bench/full.json; diffusers-check: " +
      ".cache/bench/diffusers.json)",
    ],
    [
      "--fresh-reuse",
      "full: keep the fresh-defaults scenario's models root from an earlier run (its " +
      "deno task models then finds everything in place) instead of laying it out anew",
    ],
    [
      "--fresh-export DIR",
      "full: the fresh-defaults scenario once more, with DIR (a diffusers-ONNX folder from a " +
      "real exporter: the diffusers script, Optimum) standing in for the pinned fp32 set; " +
      "`--only fresh-export` runs that alone",
    ],
    [
      "--diffusers-check",
      "the few-step presets' images against diffusers' own StableDiffusionPipeline on a " +
      "diffusers-script export (mod/bench/full_diffusers.ts); results in docs/performance.md",
    ],
    ["--export DIR", "diffusers-check: the folder diffusers_export.py wrote"],
    ["--diffusers SRC", "diffusers-check: a diffusers v0.25.0 source checkout (src/, scripts/)"],
    ["--tcd SRC", "diffusers-check: a diffusers v0.27.2 checkout, for its TCDScheduler"],
    ["--runs A,B", "diffusers-check: turbo-N and fast-N runs (default turbo-1,turbo-2,fast-4)"],
    ["--eta E", "diffusers-check: eta of the turbo runs (default 1, the preset's)"],
    ["--seed N", "diffusers-check: the seed of every run (default 42)"],
    ["--python PATH", "diffusers-check: the Python with torch (default /usr/bin/python3)"],
    ["-h, --help", "print this help and exit"],
  ],
};

async function main(args: string[]): Promise<number> {
  if (wantsHelp(args)) return printHelp(HELP);
  if (args.includes("--diffusers-check")) {
    return await runDiffusersCheck(args.filter((a) => a !== "--diffusers-check"));
  }
  if (args.includes("--full")) return await runFullBench(args.filter((a) => a !== "--full"));
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["bench", "-P=test", ...args],
    stdout: "inherit",
    stderr: "inherit",
  }).output();
  return out.code;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
