/**
 * `deno task bench`: the Deno benchmarks (`deno bench`, test-sized models),
 * or with `--full` the full-size benchmark (`full.ts`; not a test) and the
 * comparison with stable-diffusion.cpp and diffusers (`peers.ts`,
 * `--only peers`).
 *
 * @module
 */

import { type Help, printHelp, wantsHelp } from "../mod/cli/mod.ts";
import { runFullBench } from "./full.ts";
import { runDiffusersCheck } from "./full_diffusers.ts";
import { runPromptCheck } from "./full_prompt_check.ts";
import { runCheckpointCheck } from "./full_checkpoint_check.ts";
import { runPeersBench, splitPeersArgs } from "./peers.ts";

const HELP: Help = {
  usage: [
    "deno task bench [DENO BENCH FLAGS] [FILES]",
    "deno task bench --full [--steps N] [--size S] [--only A,B] [--lpb N] [--out FILE] " +
    "[--fresh-reuse] [--fresh-export DIR] [--sdcpp-src DIR --diffusers-src DIR [--python PY] " +
    "[--peers-images N] [--peers-threads N] [--peers-out FILE]]",
    "deno task bench --diffusers-check --export DIR --diffusers SRC --tcd SRC [--runs turbo-1,turbo-2,fast-4] " +
    "[--eta E] [--seed N] [--python PATH] [--out FILE]",
    "deno task bench --prompt-check --export DIR --diffusers SRC [--steps N] [--seed N] " +
    "[--python PATH] [--out FILE]",
    "deno task bench --checkpoint-check --diffusers SRC --convert-src SRC [--steps N] [--seed N] " +
    "[--small] [--keep] [--python PATH] [--out FILE]",
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
      "stand-ins), `startup` = the start-up run, `models-add` = `deno task models add` of a " +
      "full-size fp16 checkpoint (2.1 GB, written once), `chunks` = the fast and turbo presets " +
      "with prompts of 1, 2 and 4 75-token chunks, `peers` = the project against " +
      "stable-diffusion.cpp and diffusers on the same weights",
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
      "--sdcpp-src DIR",
      "full, peers: a stable-diffusion.cpp checkout with its ggml submodule (git clone " +
      "--branch master-827-97d2990 --recursive https://github.com/leejet/stable-diffusion.cpp); " +
      "built with cmake into .cache/peers/sdcpp-build",
    ],
    [
      "--diffusers-src DIR",
      "full, peers: a diffusers checkout, v0.27 or later (git clone --branch v0.27.2 " +
      "https://github.com/huggingface/diffusers); needs python3-torch, python3-onnx, " +
      "python3-numpy, python3-pil",
    ],
    [
      "--python PY",
      "full, peers, diffusers-, prompt- and checkpoint-check: the Python with torch (default " +
      "/usr/bin/python3)",
    ],
    [
      "--peers-images N",
      "full, peers: images per runtime and path (default 3; the first is a warm-up)",
    ],
    [
      "--peers-threads N",
      "full, peers: threads the peers use (default: every CPU this process may use)",
    ],
    ["--peers-out FILE", "full, peers: where its JSON goes (default .cache/bench/peers.json)"],
    [
      "--diffusers-check",
      "the few-step presets' images against diffusers' own StableDiffusionPipeline on a " +
      "diffusers-script export (bench/full_diffusers.ts); results in docs/performance.md",
    ],
    ["--export DIR", "diffusers-check: the folder diffusers_export.py wrote"],
    [
      "--diffusers SRC",
      "diffusers-, prompt- and checkpoint-check: a diffusers v0.25.0 source checkout (src/, scripts/)",
    ],
    ["--tcd SRC", "diffusers-check: a diffusers v0.27.2 checkout, for its TCDScheduler"],
    ["--runs A,B", "diffusers-check: turbo-N and fast-N runs (default turbo-1,turbo-2,fast-4)"],
    ["--eta E", "diffusers-check: eta of the turbo runs (default 1, the preset's)"],
    [
      "--seed N",
      "diffusers-check, prompt-check, checkpoint-check: the seed of every run (default 42)",
    ],
    [
      "--prompt-check",
      "a textual-inversion embedding and clip skip against diffusers' load_textual_inversion " +
      "and clip_skip on a diffusers-script export (bench/full_prompt_check.ts; --export, " +
      "--diffusers as for diffusers-check; --steps N: LCM steps, default 1); results in " +
      "docs/performance.md",
    ],
    [
      "--checkpoint-check",
      "deno task models add of a random-weight SD 1.5 written by diffusers' own code (original-" +
      "layout single files in fp32 and fp16, a diffusers folder, a standalone VAE file) against " +
      "diffusers' StableDiffusionPipeline on the weights it reads from the same files " +
      "(bench/full_checkpoint_check.ts; --diffusers: a v0.25.0 checkout; --steps N: LCM steps, " +
      "default 1); results in docs/performance.md",
    ],
    [
      "--convert-src SRC",
      "checkpoint-check: a diffusers v0.27.0 or later checkout whose " +
      "scripts/convert_diffusers_to_original_stable_diffusion.py writes the single files",
    ],
    ["--small", "checkpoint-check: the same at test widths and 64×64 (seconds), to try it"],
    ["--keep", "checkpoint-check: keep the converted sets (about 8 GB each at full size)"],
    ["-h, --help", "print this help and exit"],
  ],
};

async function main(args: string[]): Promise<number> {
  if (wantsHelp(args)) return printHelp(HELP);
  if (args.includes("--checkpoint-check")) {
    return await runCheckpointCheck(args.filter((a) => a !== "--checkpoint-check"));
  }
  if (args.includes("--prompt-check")) {
    return await runPromptCheck(args.filter((a) => a !== "--prompt-check"));
  }
  if (args.includes("--diffusers-check")) {
    return await runDiffusersCheck(args.filter((a) => a !== "--diffusers-check"));
  }
  if (args.includes("--full")) {
    const split = splitPeersArgs(args.filter((a) => a !== "--full"));
    let code = 0;
    if (split.runOthers) code = await runFullBench(split.rest);
    if (split.runPeers) {
      const peers = await runPeersBench(split.peers, !split.peersNamed);
      code = code || peers;
    }
    return code;
  }
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["bench", "-P=test", ...args],
    stdout: "inherit",
    stderr: "inherit",
  }).output();
  return out.code;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
