/**
 * The full-size benchmark (`deno task bench --full`): full-size SD 1.5 sets
 * built from a seed outside the repository, one process per scenario,
 * per-stage timings, sampled peak RSS, start-up of the real server.
 * The peers scenario (`peers.ts`, `--only peers`) runs the same weights in
 * stable-diffusion.cpp and diffusers beside the project.
 * docs/performance.md holds the method and the results. `deno task bench:gpu`
 * (`gpu.ts`) measures a GPU provider against the CPU one and PyTorch
 * (docs/gpu.md).
 *
 * @module
 */

export {
  benchCacheDir,
  buildFullSet,
  type FullSet,
  type FullSetFile,
  type FullSetOptions,
} from "./full_models.ts";
export { type RunReport } from "./full_run.ts";
export { runFullBench } from "./full.ts";
export { type PeersArgs, runPeersBench, splitPeersArgs } from "./peers.ts";
export {
  type Agreement,
  type GpuReport,
  type ImageAgreement,
  runGpuBench,
  type Stats,
} from "./gpu.ts";
export { type ProcMemory, procMemory } from "./proc_memory.ts";
