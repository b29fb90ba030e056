/**
 * The SD 1.x set converters of `models.lock` `[[derived]]` tables, which
 * `deno task models add` records for a checkpoint, a diffusers folder or a
 * standalone VAE (add.ts), and which start-up and `deno task models`
 * rebuild like any derived folder when it is missing or stale:
 *
 * - `sd15-checkpoint`: a single-file checkpoint (`.safetensors`, `.ckpt`,
 *   `.pt`, `.bin`; read by `mod/checkpoint`, pickle never executed) or a
 *   diffusers folder (its `model_index.json` among the inputs) into the
 *   ONNX set the server runs (`mod/convert` `convertSd15`): `text_encoder/`,
 *   `unet/`, `vae_decoder/`, `vae_encoder/`, `controlnet_unet/`, plus the
 *   CLIP tokenizer and scheduler config copied from inputs (a single file
 *   holds neither: they come from the pinned base set, which every SD 1.x
 *   checkpoint shares);
 * - `sd15-vae`: a standalone VAE file or diffusers `vae/` folder into
 *   `vae_decoder/` and `vae_encoder/` (`[models] vae`).
 *
 * Options: `precision` ("fp32" or "fp16"), `ema` (the EMA UNet weights;
 * checkpoints only). They are part of the recipe, so another choice is
 * another derived folder.
 *
 * @module
 */

import { basename, dirname, join } from "node:path";
import { openSd15Checkpoint, openVaeWeights, type WeightMap } from "../checkpoint/mod.ts";
import type { LockConverter } from "./lock_converters.ts";

/** `mod/convert` `convertSd15` (the ONNX set writer). */
type ConvertSd15 = (
  weights: { unet?: WeightMap; textEncoder?: WeightMap; vae?: WeightMap },
  options: {
    outDir: string;
    precision: "fp32" | "fp16";
    components: readonly string[];
    signal?: AbortSignal;
    onProgress?: (...args: never[]) => void;
  },
) => Promise<unknown>;

const convertSd15: ConvertSd15 = async (weights, options) =>
  // deno-lint-ignore no-explicit-any
  await ((await import("../convert/mod.ts")) as any).convertSd15(weights, options);
const SD15_CONVERTER_VERSION = 0;

/** File extensions of a single-file checkpoint (or VAE) `models add` converts. */
export const CHECKPOINT_EXTENSIONS: readonly string[] = [".safetensors", ".ckpt", ".pt", ".bin"];

/** The files a set converter copies into `tokenizer/` and `scheduler/`, by name. */
export const SUPPORT_FILES: Readonly<Record<string, string>> = {
  "vocab.json": "tokenizer",
  "merges.txt": "tokenizer",
  "scheduler_config.json": "scheduler",
};

/** The converter names. */
export const CHECKPOINT_CONVERTER = "sd15-checkpoint";
/** The standalone VAE converter's name. */
export const VAE_CONVERTER = "sd15-vae";

/**
 * This module's part of the version (how inputs are picked and support
 * files copied); the recipe's version is it times 1000 plus `convertSd15`'s.
 */
const SET_VERSION = 1;

/** Options of a set conversion. */
export interface SetOptions {
  /** What the ONNX files hold. */
  precision: "fp32" | "fp16";
  /** The EMA UNet weights instead of the trained ones (checkpoints only). */
  ema?: boolean;
}

function optionsProblem(
  options: Record<string, unknown> | undefined,
  allowEma: boolean,
): string | undefined {
  if (options === undefined) return 'needs options = { precision = "fp32" | "fp16" }';
  for (const k of Object.keys(options)) {
    if (k !== "precision" && !(allowEma && k === "ema")) {
      return `unknown option "${k}" (allowed: precision${allowEma ? ", ema" : ""})`;
    }
  }
  if (options.precision !== "fp32" && options.precision !== "fp16") {
    return `option "precision" must be "fp32" or "fp16", got ${JSON.stringify(options.precision)}`;
  }
  if (options.ema !== undefined && typeof options.ema !== "boolean") {
    return `option "ema" must be true or false, got ${JSON.stringify(options.ema)}`;
  }
  return undefined;
}

/** What a set's inputs are: the model source and the support files to copy. */
export interface SetSource {
  /** The checkpoint file, or the diffusers folder (the `model_index.json`'s, or the VAE's). */
  model: string;
  /** A diffusers folder (model_index.json) rather than one file. */
  folder: boolean;
  /** Support files to copy: absolute path → name under the set (`tokenizer/vocab.json`). */
  support: Array<{ from: string; to: string }>;
}

/**
 * Splits the inputs (lock paths or absolute paths) into the model source and
 * the support files; a problem (as a sentence) when they do not fit.
 */
export function setSource(inputs: readonly string[], vae: boolean): SetSource | string {
  const index = inputs.find((p) => basename(p) === "model_index.json");
  const vaeConfig = vae ? inputs.find((p) => basename(p) === "config.json") : undefined;
  if (index !== undefined || vaeConfig !== undefined) {
    const folder = dirname((index ?? vaeConfig)!);
    const outside = inputs.filter((p) => !p.startsWith(`${folder}/`));
    if (outside.length > 0) {
      return `takes the files of one diffusers folder, got ${
        JSON.stringify(outside)
      } outside ${folder}`;
    }
    const support = vae ? [] : inputs.filter((p) =>
      SUPPORT_FILES[basename(p)] !== undefined &&
      (dirname(p) === join(folder, "tokenizer") || dirname(p) === join(folder, "scheduler"))
    )
      .map((p) => ({ from: p, to: `${SUPPORT_FILES[basename(p)]}/${basename(p)}` }));
    return { model: folder, folder: true, support };
  }
  const models = inputs.filter((p) => CHECKPOINT_EXTENSIONS.some((e) => p.endsWith(e)));
  if (models.length !== 1) {
    return `takes one checkpoint file (${CHECKPOINT_EXTENSIONS.join(", ")}) or a diffusers ` +
      `folder's files, got ${JSON.stringify(inputs)}`;
  }
  const rest = inputs.filter((p) => p !== models[0]);
  if (vae && rest.length > 0) return `takes one VAE file, got ${JSON.stringify(inputs)}`;
  const unknown = rest.filter((p) => SUPPORT_FILES[basename(p)] === undefined);
  if (unknown.length > 0) {
    return `takes a checkpoint and the tokenizer and scheduler files, got ${
      JSON.stringify(unknown)
    }`;
  }
  const support = rest.map((p) => ({
    from: p,
    to: `${SUPPORT_FILES[basename(p)]}/${basename(p)}`,
  }));
  return { model: models[0], folder: false, support };
}

/** The names of every file under `dir`, "/"-separated, sorted. */
async function listFiles(dir: string, prefix = ""): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(join(dir, prefix))) {
    const name = prefix === "" ? e.name : `${prefix}/${e.name}`;
    if (e.isDirectory) out.push(...await listFiles(dir, name));
    else if (e.isFile) out.push(name);
  }
  return out.sort();
}

async function copySupport(source: SetSource, outDir: string): Promise<void> {
  for (const s of source.support) {
    await Deno.mkdir(join(outDir, dirname(s.to)), { recursive: true });
    await Deno.copyFile(s.from, join(outDir, ...s.to.split("/")));
  }
}

/** Progress of a conversion, for the CLI's line (`onProgress` of `convertSd15`). */
export type SetProgress = Parameters<ConvertSd15>[1]["onProgress"];

/** Runs a set conversion (see the module documentation); returns the names it wrote. */
export async function runSetConversion(
  kind: "checkpoint" | "vae",
  inputs: readonly string[],
  outDir: string,
  options: SetOptions,
  signal?: AbortSignal,
  onProgress?: SetProgress,
): Promise<Array<{ name: string }>> {
  const source = setSource(inputs, kind === "vae");
  if (typeof source === "string") throw new Error(source);
  if (kind === "vae") {
    const vae = await openVaeWeights(source.model);
    try {
      await convertSd15({ vae: vae.vae }, {
        outDir,
        precision: options.precision,
        components: ["vae_decoder", "vae_encoder"],
        signal,
        onProgress,
      });
    } finally {
      vae.close();
    }
  } else {
    const ck = await openSd15Checkpoint(source.model, { ema: options.ema ?? false });
    try {
      await convertSd15({ unet: ck.unet, textEncoder: ck.textEncoder, vae: ck.vae }, {
        outDir,
        precision: options.precision,
        components: ["text_encoder", "unet", "vae_decoder", "vae_encoder", "controlnet_unet"],
        signal,
        onProgress,
      });
    } finally {
      ck.close();
    }
    await copySupport(source, outDir);
  }
  return (await listFiles(outDir)).map((name) => ({ name }));
}

function setConverter(kind: "checkpoint" | "vae"): LockConverter {
  return {
    version: SET_VERSION * 1000 + SD15_CONVERTER_VERSION,
    describe: kind === "vae"
      ? "a standalone SD 1.x VAE converted to ONNX VAE decoder and encoder"
      : "an SD 1.x checkpoint converted to the ONNX set the server runs",
    inputProblem(inputs) {
      const s = setSource(inputs, kind === "vae");
      return typeof s === "string" ? s : undefined;
    },
    optionsProblem: (options) => optionsProblem(options, kind === "checkpoint"),
    outputs: () => undefined,
    run: (inputs, outDir, options, signal) =>
      runSetConversion(kind, inputs, outDir, options as unknown as SetOptions, signal),
  };
}

/** The set converters by name. */
export const SET_CONVERTERS: Readonly<Record<string, LockConverter>> = {
  [CHECKPOINT_CONVERTER]: setConverter("checkpoint"),
  [VAE_CONVERTER]: setConverter("vae"),
};
