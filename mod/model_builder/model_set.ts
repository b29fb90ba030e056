/**
 * The whole test-sized model set: SD 1.5 component sets in each export
 * flavour, ControlNets, the residual UNet and the annotators, plus scheduler
 * config, real CLIP tokenizer files and models.lock. Idempotent: a stamp file
 * (builder version, seed, dims) lets a rebuild be skipped when nothing changed.
 *
 * Layout under the models root:
 * - `sd15/` diffusers flavour (int32 ids, float `[batch]` timestep, `weights.pb`,
 *   `latent_sample` drawn in the graph, two-Slice chunk), with `controlnet_unet/`
 *   (the 13-residual UNet);
 * - `sd15-optimum/` Optimum ≤1.23 (int64 ids, int64 `[steps]` timestep,
 *   `model.onnx_data`, `latent_parameters`);
 * - `sd15-optimum-scalar/` Optimum ≥1.24 (rank-0 float timestep);
 * - `sd15-lcm/` Optimum with `timestep_cond` (LCM UNet) and an Optimum ≤1.22
 *   VAE encoder (`latent_sample` drawn in the graph, Split chunk), as the 2023
 *   LCM_Dreamshaper_v7 export has;
 * - `sd15-fp16/` diffusers flavour with fp16 I/O;
 * - `controlnet/{depth,openpose,inpaint}.onnx`;
 * - `annotators/{depth.onnx, yolox_l.onnx, dw-ll_ucoco_384.onnx}`;
 * - `taesd/vae_decoder/model.onnx`: the tiny VAE decoder (TAESD structure, width 8).
 *
 * @module
 */

import { writeClipTokenizerFiles } from "../tokenizer/mod.ts";
import { log } from "../log/mod.ts";
import { buildDepthModel } from "./depth.ts";
import { buildDwposeModel } from "./dwpose.ts";
import type { EncodedModel } from "../graph/graph.ts";
import { type LockComponent, type LockEntry, lockEntry, lockText, parseLock } from "./lock.ts";
import { type ExportOptions, type ModelDims, TINY_DIMS } from "./options.ts";
import { SCHEDULER_CONFIG_JSON } from "./scheduler_config.ts";
import { buildTextEncoder } from "./text_encoder.ts";
import { buildControlNet, buildUnet } from "./unet.ts";
import { buildVaeDecoder, buildVaeEncoder } from "./vae.ts";
import { buildYoloxModel } from "./yolox.ts";
import { buildTaesdDecoder } from "./taesd.ts";

/** Bumped whenever any builder's output changes (invalidates stamps). */
export const BUILDER_VERSION = 5;
/** Seed of the committed fixture set. */
export const DEFAULT_SEED = 1234;

/** Where the tiny VAE decoder (TAESD) lives under the models root (`[models] tiny_vae_decoder`). */
export const TINY_VAE_DECODER_PATH = "taesd/vae_decoder/model.onnx";

/** One file of the set, in memory. */
export interface BuiltFile {
  /** What the file is (models.lock component). */
  component: LockComponent;
  /** Path relative to the models root. */
  path: string;
  /** File bytes. */
  data: Uint8Array;
}

/** One SD component set: folder and export options. */
export interface SdSetSpec {
  /** Folder under the models root. */
  dir: string;
  /** Export flavour and I/O options. */
  options: ExportOptions;
  /** Also build `controlnet_unet/` (the residual UNet). */
  controlnetUnet?: boolean;
}

/** The SD sets of the fixture. */
export const SD_SETS: readonly SdSetSpec[] = [
  { dir: "sd15", options: { flavour: "diffusers", io: "float32" }, controlnetUnet: true },
  { dir: "sd15-optimum", options: { flavour: "optimum", io: "float32", upsample: "linear" } },
  {
    dir: "sd15-optimum-scalar",
    options: { flavour: "optimum", io: "float32", timestep: "float_scalar" },
  },
  {
    dir: "sd15-lcm",
    options: {
      flavour: "optimum",
      io: "float32",
      timestepCond: true,
      vaeEncoder: "latent_sample",
    },
  },
  { dir: "sd15-fp16", options: { flavour: "diffusers", io: "float16" } },
  // The contract of the pinned fp32 set (runwayml/stable-diffusion-v1-5, onnx branch,
  // diffusers 0.6.0): the `[models] base = "auto"` default on the CPU provider.
  {
    dir: "sd15-fp32",
    options: { flavour: "diffusers", io: "float32", timestep: "int64_batch" },
  },
];

/** ControlNets of the fixture: lock component and file. */
export const CONTROLNETS: ReadonlyArray<{ component: LockComponent; path: string }> = [
  { component: "controlnet_depth", path: "controlnet/depth.onnx" },
  { component: "controlnet_openpose", path: "controlnet/openpose.onnx" },
  { component: "controlnet_inpaint", path: "controlnet/inpaint.onnx" },
];

/** Adds a model (and its external data file next to it). */
function pushModel(
  files: BuiltFile[],
  component: LockComponent,
  path: string,
  m: EncodedModel,
): void {
  files.push({ component, path, data: m.model });
  if (m.external) {
    const dir = path.slice(0, path.lastIndexOf("/") + 1);
    files.push({ component, path: dir + m.external.location, data: m.external.data });
  }
}

/** Builds every model of the set in memory (no tokenizer or scheduler files). */
export function tinyModelFiles(
  seed: number = DEFAULT_SEED,
  dims: ModelDims = TINY_DIMS,
): BuiltFile[] {
  const files: BuiltFile[] = [];
  for (const set of SD_SETS) {
    const o = set.options;
    pushModel(
      files,
      "text_encoder",
      `${set.dir}/text_encoder/model.onnx`,
      buildTextEncoder(seed, dims, o),
    );
    pushModel(files, "unet", `${set.dir}/unet/model.onnx`, buildUnet(seed, dims, o));
    pushModel(
      files,
      "vae_decoder",
      `${set.dir}/vae_decoder/model.onnx`,
      buildVaeDecoder(seed, dims, o),
    );
    pushModel(
      files,
      "vae_encoder",
      `${set.dir}/vae_encoder/model.onnx`,
      buildVaeEncoder(seed, dims, o),
    );
    if (set.controlnetUnet) {
      pushModel(
        files,
        "controlnet_unet",
        `${set.dir}/controlnet_unet/model.onnx`,
        buildUnet(seed, dims, { ...o, residuals: "additional_residual" }),
      );
    }
  }
  for (const cn of CONTROLNETS) {
    const o: ExportOptions = { flavour: "diffusers", io: "float32" };
    pushModel(
      files,
      cn.component,
      cn.path,
      buildControlNet(seed, dims, { ...o, stream: cn.component }),
    );
  }
  pushModel(files, "depth", "annotators/depth.onnx", buildDepthModel(seed));
  pushModel(files, "pose_detector", "annotators/yolox_l.onnx", buildYoloxModel(seed));
  pushModel(files, "pose_estimator", "annotators/dw-ll_ucoco_384.onnx", buildDwposeModel(seed));
  pushModel(files, "vae_decoder", TINY_VAE_DECODER_PATH, buildTaesdDecoder(seed, 8));
  return files;
}

/** Options of {@link buildTinyModelSet}. */
export interface TinyModelSetOptions {
  /** Weight seed; default {@link DEFAULT_SEED}. */
  seed?: number;
  /** Channel widths; default {@link TINY_DIMS}. */
  dims?: ModelDims;
  /** Where to write models.lock; default `models.lock` next to `outDir`. */
  lockPath?: string;
  /** Rebuild even when the stamp matches. */
  force?: boolean;
}

/** Result of {@link buildTinyModelSet}. */
export interface TinyModelSet {
  /** The models root. */
  root: string;
  /** Where models.lock was written. */
  lockPath: string;
  /** Every file, as listed in models.lock. */
  entries: LockEntry[];
  /** True when the stamp matched and nothing was written. */
  skipped: boolean;
}

/** Stamp file name inside the models root. */
export const STAMP_FILE = ".stamp.json";

/**
 * Writes the set into `outDir` and models.lock next to it. Skips the work when
 * the stamp (builder version, seed, dims) matches and every locked file is
 * present with its size; otherwise clears a previously stamped `outDir` and
 * rebuilds.
 */
export async function buildTinyModelSet(
  outDir: string,
  options: TinyModelSetOptions = {},
): Promise<TinyModelSet> {
  const root = outDir.replace(/[\\/]+$/, "");
  const seed = options.seed ?? DEFAULT_SEED;
  const dims = options.dims ?? TINY_DIMS;
  const lockPath = options.lockPath ?? `${parentDir(root)}/models.lock`;
  const stamp = JSON.stringify({ builder: BUILDER_VERSION, seed, dims });

  const previous = await readText(`${root}/${STAMP_FILE}`);
  if (!options.force && previous === stamp) {
    const entries = await currentEntries(root, lockPath);
    if (entries) return { root, lockPath, entries, skipped: true };
  }
  if (previous !== undefined) await Deno.remove(root, { recursive: true });

  const started = performance.now();
  const files = tinyModelFiles(seed, dims);
  const entries: LockEntry[] = [];
  const write = async (f: BuiltFile) => {
    const path = `${root}/${f.path}`;
    await Deno.mkdir(parentDir(path), { recursive: true });
    await Deno.writeFile(path, f.data);
    entries.push(lockEntry(f.component, f.path, f.data));
  };
  for (const f of files) await write(f);
  for (const f of await tokenizerAndScheduler(root)) await write(f);
  await Deno.writeTextFile(lockPath, lockText(entries));
  await Deno.writeTextFile(`${root}/${STAMP_FILE}`, stamp);
  log("info", "model_builder", "built tiny model set", {
    root,
    files: entries.length,
    ms: Math.round(performance.now() - started),
  });
  return { root, lockPath, entries, skipped: false };
}

/**
 * Scheduler config and the real CLIP tokenizer files for every SD set. The
 * tokenizer files are written once by mod/tokenizer (into the first set, which
 * stays inside the writable fixtures folder) and copied to the others.
 */
async function tokenizerAndScheduler(root: string): Promise<BuiltFile[]> {
  const first = `${root}/${SD_SETS[0].dir}/tokenizer`;
  await writeClipTokenizerFiles(first);
  const vocab = await Deno.readFile(`${first}/vocab.json`);
  const merges = await Deno.readFile(`${first}/merges.txt`);
  const scheduler = new TextEncoder().encode(SCHEDULER_CONFIG_JSON);
  return SD_SETS.flatMap((set): BuiltFile[] => [
    { component: "tokenizer", path: `${set.dir}/tokenizer/vocab.json`, data: vocab },
    { component: "tokenizer", path: `${set.dir}/tokenizer/merges.txt`, data: merges },
    { component: "scheduler", path: `${set.dir}/scheduler/scheduler_config.json`, data: scheduler },
  ]);
}

/** The lock's entries when every listed file exists with its size, else undefined. */
async function currentEntries(root: string, lockPath: string): Promise<LockEntry[] | undefined> {
  const text = await readText(lockPath);
  if (text === undefined) return undefined;
  let entries: LockEntry[];
  try {
    entries = parseLock(text);
  } catch {
    return undefined;
  }
  for (const e of entries) {
    try {
      if ((await Deno.stat(`${root}/${e.path}`)).size !== e.size) return undefined;
    } catch {
      return undefined;
    }
  }
  return entries;
}

async function readText(path: string): Promise<string | undefined> {
  try {
    return await Deno.readTextFile(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw e;
  }
}

function parentDir(path: string): string {
  const i = Math.max(path.lastIndexOf("/"), path.lastIndexOf("\\"));
  return i <= 0 ? (i === 0 ? "/" : ".") : path.slice(0, i);
}
