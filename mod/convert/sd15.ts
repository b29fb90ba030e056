/**
 * SD 1.x weights → the ONNX set the server runs, in TypeScript, one tensor
 * at a time. The weights are diffusers-named maps (a `UNet2DConditionModel`,
 * a transformers `CLIPTextModel`, an `AutoencoderKL`, as `mod/checkpoint`
 * reads them from single-file checkpoints, diffusers folders and VAE files);
 * the graphs are the project's one SD 1.x architecture (`mod/graph/sd15*.ts`)
 * at the config the weights' shapes give, so the real SD 1.5 and test-sized
 * checkpoints convert alike.
 *
 * The set has the layout and I/O of the diffusers script's export
 * (`scripts/convert_stable_diffusion_checkpoint_to_onnx.py`), which the
 * pinned and derived base sets have:
 *
 * ```text
 * <outDir>/text_encoder/model.onnx        int32 input_ids → last_hidden_state, pooler_output (weights inline)
 * <outDir>/unet/model.onnx, weights.pb    sample, timestep [batch], encoder_hidden_states → out_sample
 * <outDir>/controlnet_unet/model.onnx, weights.pb   the same UNet + the 13 ControlNet residual inputs
 * <outDir>/vae_decoder/model.onnx         latent_sample → sample (weights inline)
 * <outDir>/vae_encoder/model.onnx         sample → latent_sample, drawn in the graph (weights inline)
 * <outDir>/tokenizer/vocab.json, merges.txt
 * <outDir>/scheduler/scheduler_config.json
 * ```
 *
 * fp32 (what the CPU provider runs fastest) or fp16 (weights and float I/O in
 * half precision, like the pinned fp16 set, for `webgpu`/`cuda`). Every name
 * and shape is checked before anything is written; then each tensor is read,
 * laid out (a torch Linear `[out, in]` transposed for the MatMul), narrowed
 * when fp16, written and dropped, so peak memory is one tensor plus the
 * graphs' structure. Everything goes into a scratch folder beside `outDir`,
 * renamed into place at the end: a failure or an abort (the signal is checked
 * between tensors) removes it and leaves no half-written set.
 *
 * @module
 */

import { copyFile, mkdir, readdir, rename, rm } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { createHash } from "node:crypto";
import {
  buildSd15TextEncoder,
  buildSd15Unet,
  buildSd15VaeDecoder,
  buildSd15VaeEncoder,
  inferTextEncoderConfig,
  inferUnetConfig,
  inferVaeConfig,
  MapWeights,
  OPSET,
  type Sd15Model,
  type TextEncoderConfig,
  type UnetConfig,
  type VaeConfig,
  type WeightMap,
  type WeightProblem,
} from "../graph/mod.ts";
import { processAlive } from "../lora/mod.ts";
import { writeClipTokenizerFiles } from "../tokenizer/mod.ts";
import { SD15_SCHEDULER_CONFIG_JSON } from "../schedulers/mod.ts";

/** Bumped whenever {@link convertSd15} writes different bytes for the same weights and options. */
export const SD15_CONVERTER_VERSION = 1;

/** The models a set can hold, by their folder names. */
export type Sd15Component =
  | "text_encoder"
  | "unet"
  | "controlnet_unet"
  | "vae_decoder"
  | "vae_encoder";

/** Every component, in the order they are written. */
export const SD15_COMPONENTS: readonly Sd15Component[] = [
  "text_encoder",
  "unet",
  "controlnet_unet",
  "vae_decoder",
  "vae_encoder",
];

/** The weights to convert, each a map keyed by diffusers state-dict names. */
export interface Sd15WeightMaps {
  /** `UNet2DConditionModel` weights (`conv_in.weight`, `down_blocks.0.resnets.0.norm1.weight`, …). */
  unet?: WeightMap;
  /** transformers `CLIPTextModel` weights (`text_model.*`). */
  textEncoder?: WeightMap;
  /** `AutoencoderKL` weights (`encoder.*`, `decoder.*`, `quant_conv.*`, `post_quant_conv.*`). */
  vae?: WeightMap;
}

/** Progress of a conversion: after each tensor written. */
export interface Sd15Progress {
  /** The model being written. */
  component: Sd15Component;
  /** Tensors of it written so far. */
  done: number;
  /** Its tensors (weights and constants). */
  total: number;
}

/** Options of {@link convertSd15}. */
export interface ConvertSd15Options {
  /**
   * The set's folder. It must not exist or be an empty folder; it appears
   * (renamed from a scratch folder beside it) only when everything is written.
   */
  outDir: string;
  /** Weight precision and float I/O: "fp32" (default) or "fp16". */
  precision?: "fp32" | "fp16";
  /**
   * Which models to write. Default: text_encoder, unet, vae_decoder and
   * vae_encoder, those whose weights are given. `controlnet_unet` (the UNet
   * with the ControlNet residual inputs, from the same weights; as large again
   * as the UNet) only when asked for.
   */
  components?: readonly Sd15Component[];
  /**
   * The tokenizer files: a folder whose `vocab.json` and `merges.txt` are
   * copied (a diffusers folder's `tokenizer/`, or the base set's), `false`
   * for none; default: SD 1.x's CLIP tokenizer written by `mod/tokenizer`.
   */
  tokenizer?: string | false;
  /**
   * `scheduler/scheduler_config.json`: a file to copy (a diffusers folder's),
   * `false` for none; default: SD 1.5's (PNDM, scaled_linear 0.00085–0.012).
   */
  scheduler?: string | false;
  /** Aborts the conversion (checked between tensors); nothing is left behind. */
  signal?: AbortSignal;
  /** Called after each tensor written. */
  onProgress?: (progress: Sd15Progress) => void;
}

/** One file of the written set. */
export interface Sd15File {
  /** Path relative to `outDir`, "/" separators (`unet/weights.pb`). */
  path: string;
  /** What it belongs to: a model component, `tokenizer` or `scheduler`. */
  component: Sd15Component | "tokenizer" | "scheduler";
  /** Bytes. */
  size: number;
  /** sha256 of the bytes written (64 lowercase hex). */
  sha256: string;
}

/** What {@link convertSd15} wrote. */
export interface Sd15Conversion {
  /** The set's folder. */
  outDir: string;
  /** Every file written, in writing order. */
  files: Sd15File[];
  /** The architectures the weights' shapes gave. */
  architecture: { unet?: UnetConfig; textEncoder?: TextEncoderConfig; vae?: VaeConfig };
  /** Trainable parameters written per model. */
  params: Partial<Record<Sd15Component, number>>;
  /** Names in the given maps that no written model uses (e.g. `text_model.embeddings.position_ids`). */
  unused: { unet: string[]; textEncoder: string[]; vae: string[] };
}

/** Weights that cannot be converted, or an output folder that cannot be written; nothing is written. */
export class Sd15ConversionError extends Error {
  /** Creates an error with a complete message. */
  constructor(message: string) {
    super(message);
    this.name = "Sd15ConversionError";
  }
}

/** A model to write: its graph, where it goes, and the source to check. */
interface Planned {
  component: Sd15Component;
  model: Sd15Model;
  source: MapWeights;
  /** External data file name (UNets), or undefined: weights inline. */
  external?: string;
}

/**
 * Converts SD 1.x weights into an ONNX set in `options.outDir` (layout in the
 * module doc). Returns the files with their sizes and sha256, the inferred
 * architectures and the unused names.
 *
 * @throws Sd15ConversionError when a model's weights are missing or mis-shaped,
 *   a requested component has no weights, or `outDir` is not empty (nothing
 *   written); the abort reason when `signal` aborts; a write error (the
 *   scratch folder is removed)
 */
export async function convertSd15(
  weights: Sd15WeightMaps,
  options: ConvertSd15Options,
): Promise<Sd15Conversion> {
  const { signal } = options;
  signal?.throwIfAborted();
  const fp16 = (options.precision ?? "fp32") === "fp16";
  if (options.precision !== undefined && !["fp32", "fp16"].includes(options.precision)) {
    throw new Sd15ConversionError(
      `precision ${JSON.stringify(options.precision)}: supported are "fp32" and "fp16"`,
    );
  }
  const components = options.components ?? defaultComponents(weights);
  if (components.length === 0) {
    throw new Sd15ConversionError("no weights to convert: give a UNet, text encoder or VAE");
  }
  const { plans, architecture } = plan(weights, components);
  const outDir = options.outDir.replace(/[\\/]+$/, "");
  await checkOutDir(outDir);
  await sweepScratch(outDir);

  const scratch = join(
    dirname(outDir),
    `${scratchPrefix(outDir)}${Deno.pid}-${crypto.randomUUID().slice(0, 8)}`,
  );
  await mkdir(scratch, { recursive: true, mode: 0o755 });
  const files: Sd15File[] = [];
  try {
    for (const p of plans) {
      signal?.throwIfAborted();
      const dir = join(scratch, p.component);
      await mkdir(dir);
      const written = await p.model.graph.writeModel(join(dir, "model.onnx"), {
        opset: OPSET,
        externalData: p.external ? { location: p.external, minBytes: 1024 } : undefined,
        float16: fp16,
        docString: `SD 1.x ${p.component} converted by generate-image-sd15-mcp ` +
          `(${fp16 ? "fp16" : "fp32"}, converter ${SD15_CONVERTER_VERSION})`,
        signal,
        onTensor: (done, total) => options.onProgress?.({ component: p.component, done, total }),
      });
      for (const f of written) {
        files.push({ path: `${p.component}/${f.name}`, component: p.component, ...f });
      }
    }
    signal?.throwIfAborted();
    if (options.tokenizer !== false) {
      files.push(...await writeTokenizer(join(scratch, "tokenizer"), options.tokenizer));
    }
    if (options.scheduler !== false) {
      files.push(await writeScheduler(join(scratch, "scheduler"), options.scheduler));
    }
    signal?.throwIfAborted();
    await rename(scratch, outDir).catch((e) => {
      throw new Sd15ConversionError(
        `${outDir}: cannot move the converted set into place: ${(e as Error).message}`,
      );
    });
  } catch (e) {
    await rm(scratch, { recursive: true, force: true });
    throw e;
  }
  // A name is unused when no model written from its map asked for it.
  const unusedOf = (map: WeightMap | undefined, of: Sd15Component[]): string[] => {
    if (!map) return [];
    const sources = plans.filter((p) => of.includes(p.component)).map((p) => p.source);
    if (sources.length === 0) return [...map.keys()].sort();
    const lists = sources.map((s) => new Set(s.unused()));
    return [...lists[0]].filter((k) => lists.every((l) => l.has(k))).sort();
  };
  return {
    outDir,
    files,
    architecture,
    params: Object.fromEntries(plans.map((p) => [p.component, p.model.params])),
    unused: {
      unet: unusedOf(weights.unet, ["unet", "controlnet_unet"]),
      textEncoder: unusedOf(weights.textEncoder, ["text_encoder"]),
      vae: unusedOf(weights.vae, ["vae_decoder", "vae_encoder"]),
    },
  };
}

/** Scratch folders of `outDir`: `.<name>.converting-<pid>-<random>` beside it. */
function scratchPrefix(outDir: string): string {
  return `.${basename(outDir)}.converting-`;
}

/**
 * Removes scratch folders beside `outDir` left by processes that no longer
 * run (a conversion killed before it could clean up).
 */
async function sweepScratch(outDir: string): Promise<void> {
  const parent = dirname(outDir);
  const prefix = scratchPrefix(outDir);
  let names: string[];
  try {
    names = await readdir(parent);
  } catch {
    return; // no parent yet: nothing to sweep
  }
  for (const name of names) {
    if (!name.startsWith(prefix)) continue;
    const pid = Number(name.slice(prefix.length).split("-")[0]);
    if (pid !== Deno.pid && !(await processAlive(pid))) {
      await rm(join(parent, name), { recursive: true, force: true });
    }
  }
}

/** The components the given weights make by default. */
function defaultComponents(weights: Sd15WeightMaps): Sd15Component[] {
  const out: Sd15Component[] = [];
  if (weights.textEncoder) out.push("text_encoder");
  if (weights.unet) out.push("unet");
  if (weights.vae) out.push("vae_decoder", "vae_encoder");
  return out;
}

/** Builds every requested graph and checks its weights; throws before anything is written. */
function plan(
  weights: Sd15WeightMaps,
  components: readonly Sd15Component[],
): { plans: Planned[]; architecture: Sd15Conversion["architecture"] } {
  for (const c of components) {
    if (!SD15_COMPONENTS.includes(c)) {
      throw new Sd15ConversionError(
        `component ${JSON.stringify(c)}: supported are ${SD15_COMPONENTS.join(", ")}`,
      );
    }
  }
  const need = (map: WeightMap | undefined, c: Sd15Component, what: string): WeightMap => {
    if (!map) throw new Sd15ConversionError(`${c}: no ${what} weights were given`);
    return map;
  };
  const architecture: Sd15Conversion["architecture"] = {};
  const infer = <T>(what: string, f: () => T): T => {
    try {
      return f();
    } catch (e) {
      throw new Sd15ConversionError(`${what}: ${(e as Error).message}`);
    }
  };
  const plans: Planned[] = [];
  for (const c of SD15_COMPONENTS.filter((c) => components.includes(c))) {
    if (c === "text_encoder") {
      const map = need(weights.textEncoder, c, "text encoder");
      const config = infer("text encoder", () => inferTextEncoderConfig(map));
      architecture.textEncoder = config;
      const source = new MapWeights(map);
      plans.push({ component: c, model: buildSd15TextEncoder(source, config), source });
    } else if (c === "unet" || c === "controlnet_unet") {
      const map = need(weights.unet, c, "UNet");
      const config = architecture.unet ?? infer("UNet", () => inferUnetConfig(map));
      if (config.inChannels !== 4) {
        throw new Sd15ConversionError(
          `UNet: conv_in takes ${config.inChannels} channels; supported: 4 (an SD 1.x UNet; ` +
            `9 is an inpainting UNet: inpaint_image uses the inpaint ControlNet with a regular one)`,
        );
      }
      architecture.unet = config;
      const source = new MapWeights(map);
      const model = buildSd15Unet(source, {
        config,
        residuals: c === "controlnet_unet",
        name: c,
      });
      plans.push({ component: c, model, source, external: "weights.pb" });
    } else {
      const map = need(weights.vae, c, "VAE");
      const config = architecture.vae ?? infer("VAE", () => inferVaeConfig(map));
      architecture.vae = config;
      const source = new MapWeights(map);
      const build = c === "vae_decoder" ? buildSd15VaeDecoder : buildSd15VaeEncoder;
      plans.push({ component: c, model: build(source, config), source });
    }
  }
  const { unet, textEncoder } = architecture;
  if (unet && textEncoder && unet.crossAttentionDim !== textEncoder.hiddenSize) {
    throw new Sd15ConversionError(
      `the UNet attends to ${unet.crossAttentionDim}-wide text states but the text encoder ` +
        `makes ${textEncoder.hiddenSize}-wide ones: not one SD 1.x model`,
    );
  }
  const problems = plans.flatMap((p) =>
    p.source.problems().map((q) => ({ component: p.component, ...q }))
  );
  if (problems.length > 0) throw new Sd15ConversionError(describeProblems(problems));
  return { plans, architecture };
}

/** One line naming the first few problems and how many there are. */
function describeProblems(problems: Array<WeightProblem & { component: Sd15Component }>): string {
  const seen = new Set<string>();
  const distinct = problems.filter((p) => {
    const key = `${p.name}:${p.problem}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
  const shown = distinct.slice(0, 5).map((p) => `${p.component} ${p.name}: ${p.problem}`);
  const more = distinct.length > 5 ? ` (and ${distinct.length - 5} more)` : "";
  return `the weights do not fit the SD 1.x architecture: ${shown.join("; ")}${more}`;
}

/** `outDir` must be absent or an empty folder (the finished set is renamed onto it). */
async function checkOutDir(outDir: string): Promise<void> {
  let entries: string[];
  try {
    entries = await readdir(outDir);
  } catch (e) {
    const code = (e as { code?: string }).code;
    if (code === "ENOENT") return;
    throw new Sd15ConversionError(`${outDir}: cannot be used as the output folder (${code})`);
  }
  if (entries.length > 0) {
    throw new Sd15ConversionError(`${outDir}: the output folder exists and is not empty`);
  }
}

/** Writes the tokenizer files (copied from `from`, or SD 1.x's CLIP tokenizer). */
async function writeTokenizer(dir: string, from: string | undefined): Promise<Sd15File[]> {
  await mkdir(dir, { recursive: true });
  const names = ["vocab.json", "merges.txt"];
  if (from === undefined) {
    await writeClipTokenizerFiles(dir);
  } else {
    for (const n of names) {
      await copyFile(join(from, n), join(dir, n)).catch((e) => {
        throw new Sd15ConversionError(`tokenizer: cannot copy ${join(from, n)}: ${e.message}`);
      });
    }
  }
  return await Promise.all(
    names.map(async (n) =>
      hashed(`tokenizer/${n}`, "tokenizer", await Deno.readFile(join(dir, n)))
    ),
  );
}

/** Writes `scheduler/scheduler_config.json` (copied from `from`, or SD 1.5's). */
async function writeScheduler(dir: string, from: string | undefined): Promise<Sd15File> {
  await mkdir(dir, { recursive: true });
  const bytes = from === undefined
    ? new TextEncoder().encode(SD15_SCHEDULER_CONFIG_JSON)
    : await Deno.readFile(from).catch((e) => {
      throw new Sd15ConversionError(`scheduler: cannot read ${from}: ${e.message}`);
    });
  await Deno.writeFile(join(dir, "scheduler_config.json"), bytes);
  return hashed("scheduler/scheduler_config.json", "scheduler", bytes);
}

function hashed(path: string, component: Sd15File["component"], bytes: Uint8Array): Sd15File {
  return {
    path,
    component,
    size: bytes.byteLength,
    sha256: createHash("sha256").update(bytes).digest("hex"),
  };
}
