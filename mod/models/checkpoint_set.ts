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
 *   `unet/`, `vae_decoder/`, `vae_encoder/`, `controlnet_unet/`, `tokenizer/`
 *   and `scheduler/` (a diffusers folder's own tokenizer and scheduler config
 *   when it has them, which are then inputs too; else SD 1.x's CLIP tokenizer
 *   and SD 1.5's scheduler config, which every SD 1.x checkpoint shares and
 *   the converter writes itself);
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
import { rename, rm } from "node:fs/promises";
import { openSd15Checkpoint, openVaeWeights } from "../checkpoint/mod.ts";
import {
  convertSd15,
  SD15_CONVERTER_VERSION,
  type Sd15Component,
  type Sd15Progress,
} from "../convert/mod.ts";
import type { LockConverter } from "./lock_converter.ts";

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
 * This module's part of the version (how inputs are picked and passed); the
 * recipe's version is it times 1000 plus `convertSd15`'s.
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
  const support = vae ? [] : inputs.filter((p) => SUPPORT_FILES[basename(p)] !== undefined)
    .map((p) => ({ from: p, to: `${SUPPORT_FILES[basename(p)]}/${basename(p)}` }));
  const vocab = support.find((s) => s.to === "tokenizer/vocab.json");
  const merges = support.find((s) => s.to === "tokenizer/merges.txt");
  if ((vocab === undefined) !== (merges === undefined)) {
    return "takes a tokenizer's vocab.json and merges.txt together, or neither";
  }
  if (vocab && merges && dirname(vocab.from) !== dirname(merges.from)) {
    return "takes vocab.json and merges.txt from one folder";
  }
  const rest = inputs.filter((p) => !support.some((s) => s.from === p));
  const index = rest.find((p) => basename(p) === "model_index.json");
  const vaeConfig = vae ? rest.find((p) => basename(p) === "config.json") : undefined;
  if (index !== undefined || vaeConfig !== undefined) {
    const folder = dirname((index ?? vaeConfig)!);
    const outside = rest.filter((p) => !p.startsWith(`${folder}/`));
    if (outside.length > 0) {
      return `takes the files of one diffusers folder, got ${
        JSON.stringify(outside)
      } outside ${folder}`;
    }
    return { model: folder, folder: true, support };
  }
  if (rest.length !== 1 || !CHECKPOINT_EXTENSIONS.some((e) => rest[0].endsWith(e))) {
    return `takes one checkpoint file (${CHECKPOINT_EXTENSIONS.join(", ")}) or a diffusers ` +
      `folder's files, got ${JSON.stringify(inputs)}`;
  }
  return { model: rest[0], folder: false, support };
}

/** Progress of a conversion: after each tensor written (`convertSd15`'s). */
export type SetProgress = (progress: Sd15Progress) => void;

/**
 * Runs a set conversion (see the module documentation) into `outDir` (an
 * empty folder); returns the files it wrote with their sizes and sha256.
 * `convertSd15` writes into a scratch folder beside its target: its target
 * is a folder inside `outDir`, so that scratch folder lies inside `outDir`
 * too (a stop that removes `outDir` removes it), and its files are moved up.
 */
export async function runSetConversion(
  kind: "checkpoint" | "vae",
  inputs: readonly string[],
  outDir: string,
  options: SetOptions,
  signal?: AbortSignal,
  onProgress?: SetProgress,
): Promise<Array<{ name: string; size: number; sha256: string }>> {
  const source = setSource(inputs, kind === "vae");
  if (typeof source === "string") throw new Error(source);
  const set = join(outDir, "set");
  let written;
  if (kind === "vae") {
    const vae = await openVaeWeights(source.model);
    try {
      written = await convertSd15({ vae: vae.vae }, {
        outDir: set,
        precision: options.precision,
        components: ["vae_decoder", "vae_encoder"],
        tokenizer: false,
        scheduler: false,
        signal,
        onProgress,
      });
    } finally {
      vae.close();
    }
  } else {
    const ck = await openSd15Checkpoint(source.model, { ema: options.ema ?? false });
    const vocab = source.support.find((s) => s.to === "tokenizer/vocab.json");
    const scheduler = source.support.find((s) => s.to === "scheduler/scheduler_config.json");
    try {
      written = await convertSd15({ unet: ck.unet, textEncoder: ck.textEncoder, vae: ck.vae }, {
        outDir: set,
        precision: options.precision,
        components: CHECKPOINT_COMPONENTS,
        // A single file holds neither: SD 1.x's CLIP tokenizer and SD 1.5's scheduler config.
        ...(vocab ? { tokenizer: dirname(vocab.from) } : {}),
        ...(scheduler ? { scheduler: scheduler.from } : {}),
        signal,
        onProgress,
      });
    } finally {
      ck.close();
    }
  }
  for await (const e of Deno.readDir(set)) await rename(join(set, e.name), join(outDir, e.name));
  await rm(set, { recursive: true });
  return written.files.map((f) => ({ name: f.path, size: f.size, sha256: f.sha256 }));
}

/** What a checkpoint set holds: every model, the ControlNet-residual UNet included. */
const CHECKPOINT_COMPONENTS: readonly Sd15Component[] = [
  "text_encoder",
  "unet",
  "controlnet_unet",
  "vae_decoder",
  "vae_encoder",
];

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
