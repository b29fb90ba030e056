/**
 * SD 1.x checkpoints as their three parts under diffusers' names: a single
 * file in the original CompVis/LDM layout (`.safetensors` or PyTorch), or a
 * diffusers folder; and standalone VAE files. Everything a conversion cannot
 * use is refused here, before anything is written, with one line naming what
 * was found and what is supported.
 *
 * @module
 */

import { readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { CheckpointError } from "./errors.ts";
import {
  emaKey,
  isVaeAttentionProjection,
  normaliseDiffusersVaeName,
  originalVaeLevels,
  SD15_PREFIXES,
  textEncoderToDiffusers,
  unetToDiffusers,
  vaeToDiffusers,
} from "./sd15_keys.ts";
import {
  inferSd15Widths,
  SD15_WIDTHS,
  sd15Shapes,
  type Sd15Widths,
  shapeMismatch,
} from "./sd15_shapes.ts";
import { openWeightFile } from "./weight_file.ts";
import {
  reshaped,
  type WeightFile,
  type WeightFormat,
  type WeightMap,
  type WeightTensor,
} from "./weights.ts";

/** An SD 1.x model's weights under diffusers' state-dict names, read on demand. */
export interface Sd15Checkpoint {
  /** `UNet2DConditionModel` weights (`conv_in.weight`, `down_blocks.0.resnets.0.norm1.weight`, …). */
  unet: WeightMap;
  /** `AutoencoderKL` weights (`encoder.*`, `decoder.*`, `quant_conv.*`, `post_quant_conv.*`). */
  vae: WeightMap;
  /** transformers `CLIPTextModel` weights (`text_model.*`). */
  textEncoder: WeightMap;
  /** Where the weights came from. */
  layout: "original" | "diffusers-folder";
  /** How the (UNet's) file was read. */
  format: WeightFormat;
  /** Whether the UNet is the file's EMA copy. */
  ema: boolean;
  /** Tensors of the input that no part uses: how many, and their distinct name prefixes. */
  ignored: { count: number; prefixes: string[] };
  /** Closes the files. */
  close(): void;
}

/** Options of {@link openSd15Checkpoint}. */
export interface Sd15Options {
  /** Take the UNet from the EMA copy (`model_ema.*`) instead of the regular weights. */
  ema?: boolean;
}

/** A standalone VAE under diffusers' `AutoencoderKL` names. */
export interface VaeWeights {
  /** The weights. */
  vae: WeightMap;
  /** Closes the file(s). */
  close(): void;
}

const SUPPORTED = "supported: SD 1.x checkpoints (original single-file layout as .safetensors or " +
  ".ckpt/.pt/.bin, or a diffusers folder)";

/**
 * Opens an SD 1.x checkpoint: a single file in the original layout (fp32,
 * fp16 or bf16; with or without EMA weights; either text-encoder key form;
 * a `state_dict` wrapper) or a diffusers folder (`model_index.json` with
 * `unet/`, `vae/`, `text_encoder/`).
 *
 * @throws CheckpointError for anything that is not an SD 1.x text-to-image checkpoint
 */
export async function openSd15Checkpoint(
  path: string,
  opts: Sd15Options = {},
): Promise<Sd15Checkpoint> {
  const info = await stat(path).catch((e) => {
    throw new CheckpointError(`${path}: cannot be read: ${(e as Error).message}`);
  });
  if (info.isDirectory()) return await openDiffusersFolder(path, opts);
  const wf = await openWeightFile(path);
  try {
    return splitOriginal(path, wf, opts);
  } catch (e) {
    wf.close();
    throw e;
  }
}

/** Refusals that the names and shapes alone decide: other model families, LoRAs, embeddings. */
function refuseForeign(path: string, tensors: WeightMap): void {
  const names = [...tensors.keys()];
  const some = (re: RegExp) => names.find((n) => re.test(n));
  let hit: string | undefined;
  if ((hit = some(/(^|\.)lora_(down|up|A|B)\b|^lora_(unet|te\d?)_|\.lora\./))) {
    throw new CheckpointError(
      `${path}: a LoRA (it has keys such as ${hit}), not a checkpoint; LoRA files are applied as ` +
        `LoRAs on a model; ${SUPPORTED}`,
    );
  }
  if ((hit = some(/^(emb_params|string_to_param|string_to_token|clip_l|clip_g)(\.|$)/))) {
    throw new CheckpointError(
      `${path}: a textual-inversion embedding (it has ${hit}), not a checkpoint; embeddings are used ` +
        `in prompts; ${SUPPORTED}`,
    );
  }
  if ((hit = some(/^conditioner\.embedders\./))) {
    throw new CheckpointError(
      `${path}: an SDXL checkpoint (it has ${hit}); ${SUPPORTED}`,
    );
  }
  if ((hit = some(/^cond_stage_model\.model\./))) {
    throw new CheckpointError(
      `${path}: an SD 2.x checkpoint (OpenCLIP text encoder, ${hit}); ${SUPPORTED} ` +
        `with the CLIP ViT-L/14 text encoder`,
    );
  }
}

/** Refusals decided on the diffusers-named parts: context width and UNet input channels. */
function refuseShapes(path: string, unet: WeightMap, textEncoder: WeightMap): void {
  for (const [name, t] of unet) {
    if (/\.attn2\.to_k\.weight$/.test(name) && t.shape[1] === 1024) {
      throw new CheckpointError(
        `${path}: an SD 2.x checkpoint (the UNet's cross-attention context is 1024 wide, ${name} ` +
          `[${t.shape}]); ${SUPPORTED} with a 768-wide context`,
      );
    }
  }
  const tok = textEncoder.get("text_model.embeddings.token_embedding.weight");
  if (tok && tok.shape[1] === 1024) {
    throw new CheckpointError(
      `${path}: an SD 2.x checkpoint (the text encoder is 1024 wide); ${SUPPORTED} with the ` +
        `768-wide CLIP ViT-L/14 text encoder`,
    );
  }
  const toK = unet.get("down_blocks.0.attentions.0.transformer_blocks.0.attn2.to_k.weight");
  if (tok && toK && toK.shape[1] !== tok.shape[1]) {
    throw new CheckpointError(
      `${path}: the UNet's cross-attention context is ${toK.shape[1]} wide but the text encoder ` +
        `is ${tok.shape[1]} wide; ${SUPPORTED} whose UNet and text encoder belong together`,
    );
  }
  const convIn = unet.get("conv_in.weight");
  const inChannels = convIn?.shape[1];
  if (inChannels === 9) {
    throw new CheckpointError(
      `${path}: an SD 1.x inpainting UNet (conv_in takes 9 input channels); only regular ` +
        `4-channel SD 1.x checkpoints are supported: inpaint_image uses the inpaint ControlNet ` +
        `with a regular checkpoint`,
    );
  }
  if (inChannels === 8) {
    throw new CheckpointError(
      `${path}: an instruct-pix2pix UNet (conv_in takes 8 input channels); only regular 4-channel ` +
        `SD 1.x checkpoints are supported`,
    );
  }
  if (inChannels !== undefined && inChannels !== 4) {
    throw new CheckpointError(
      `${path}: a UNet whose conv_in takes ${inChannels} input channels; only regular 4-channel ` +
        `SD 1.x checkpoints are supported`,
    );
  }
}

/**
 * Checks every part against SD 1.x's names and shapes at the widths its own
 * weights have: a missing weight, a misshapen one, or one the UNet or VAE
 * should not have is refused; a text-encoder tensor transformers' model does
 * not have is left out and counted (`ignore`), as loading with
 * transformers would leave it out.
 */
function refuseLayout(
  path: string,
  parts: { unet: WeightMap; vae: WeightMap; textEncoder: Map<string, WeightTensor> | WeightMap },
  ignore: (name: string) => void,
): void {
  const inferred = inferSd15Widths(parts);
  const widths = { ...SD15_WIDTHS };
  for (const [k, v] of Object.entries(inferred) as [keyof Sd15Widths, number | undefined][]) {
    if (v !== undefined) widths[k] = v;
  }
  const expected = sd15Shapes(widths);
  const te = parts.textEncoder;
  if (te instanceof Map) {
    for (const name of [...te.keys()]) {
      if (!expected.textEncoder.has(name)) {
        te.delete(name);
        ignore(name);
      }
    }
  }
  for (
    const [part, label] of [
      ["unet", "UNet"],
      ["vae", "VAE"],
      ["textEncoder", "text encoder"],
    ] as const
  ) {
    const wrong = shapeMismatch(parts[part], expected[part]);
    if (wrong) {
      throw new CheckpointError(
        `${path}: the ${label} does not have SD 1.x's layout: ${wrong}; ${SUPPORTED}`,
      );
    }
  }
}

/** Keys each part must have, to tell a missing part from a present one. */
const REQUIRED = {
  unet: ["conv_in.weight", "conv_out.weight", "time_embedding.linear_1.weight"],
  vae: [
    "encoder.conv_in.weight",
    "decoder.conv_in.weight",
    "quant_conv.weight",
    "post_quant_conv.weight",
  ],
  textEncoder: [
    "text_model.embeddings.token_embedding.weight",
    "text_model.final_layer_norm.weight",
  ],
} as const;

const PART_NAMES = {
  unet: `UNet (${SD15_PREFIXES.unet}*)`,
  vae: `VAE (${SD15_PREFIXES.vae}*)`,
  textEncoder: `text encoder (${SD15_PREFIXES.textEncoder}*)`,
} as const;

/** Throws naming the parts without their required keys. */
function refuseMissing(
  path: string,
  parts: { unet: WeightMap; vae: WeightMap; textEncoder: WeightMap },
  folder: boolean,
  standaloneVae = false,
): void {
  const missing: string[] = [];
  for (const part of ["unet", "vae", "textEncoder"] as const) {
    const lacks = REQUIRED[part].filter((k) => !parts[part].has(k));
    if (lacks.length === 0) continue;
    const what = folder
      ? `${{ unet: "unet/", vae: "vae/", textEncoder: "text_encoder/" }[part]}`
      : PART_NAMES[part];
    missing.push(
      parts[part].size === 0 ? `no ${what}` : `an incomplete ${what} (no ${lacks.join(", ")})`,
    );
  }
  if (missing.length === 0) return;
  // A VAE alone: a checkpoint's first_stage_model part, or a standalone VAE's top-level encoder/decoder.
  const onlyVae = !folder && parts.unet.size === 0 && parts.textEncoder.size === 0 &&
    (parts.vae.size > 0 || standaloneVae);
  throw new CheckpointError(
    `${path}: ${missing.join(", ")}; an SD 1.x checkpoint has a UNet, a VAE and a text encoder` +
      (onlyVae ? " (a standalone VAE file is added with --component vae)" : ""),
  );
}

/** Counts names by a short prefix for the "ignored" line. */
class Ignored {
  count = 0;
  readonly #prefixes = new Set<string>();
  add(name: string, usedNamespace: boolean): void {
    this.count++;
    if (usedNamespace) this.#prefixes.add(name);
    else {
      const dot = name.indexOf(".");
      this.#prefixes.add(dot < 0 ? name : name.slice(0, dot + 1) + "*");
    }
  }
  get value(): { count: number; prefixes: string[] } {
    return { count: this.count, prefixes: [...this.#prefixes].sort() };
  }
}

/** A buffer inside the text encoder that inference never uses (transformers' `position_ids`). */
const TEXT_ENCODER_BUFFERS = /^text_model\.embeddings\.position_ids$/;

function splitOriginal(path: string, wf: WeightFile, opts: Sd15Options): Sd15Checkpoint {
  const tensors = wf.tensors;
  refuseForeign(path, tensors);
  const unetOriginal = new Map<string, WeightTensor>();
  const vaeOriginal = new Map<string, WeightTensor>();
  const textEncoder = new Map<string, WeightTensor>();
  const ignored = new Ignored();
  const emaNames = new Set<string>();
  for (const [name, t] of tensors) {
    if (name.startsWith(SD15_PREFIXES.unet)) {
      unetOriginal.set(name.slice(SD15_PREFIXES.unet.length), t);
    } else if (name.startsWith(SD15_PREFIXES.vae)) {
      vaeOriginal.set(name.slice(SD15_PREFIXES.vae.length), t);
    } else if (name.startsWith(SD15_PREFIXES.textEncoder)) {
      const rest = name.slice(SD15_PREFIXES.textEncoder.length);
      const hf = textEncoderToDiffusers(rest);
      if (hf === undefined || TEXT_ENCODER_BUFFERS.test(hf)) ignored.add(name, true);
      else textEncoder.set(hf, t);
    } else if (name.startsWith(SD15_PREFIXES.ema)) emaNames.add(name);
    else ignored.add(name, false);
  }
  // The UNet: regular weights by default, the EMA copy on request (diffusers `extract_ema`).
  const unet = new Map<string, WeightTensor>();
  const useEma = opts.ema === true;
  if (useEma && unetOriginal.size > 0) {
    const missing = [...unetOriginal.keys()].filter((k) => !emaNames.has(emaKey(k)));
    if (missing.length > 0) {
      throw new CheckpointError(
        emaNames.size === 0
          ? `${path}: no EMA weights (model_ema.*) in the file; open it without the EMA option`
          : `${path}: the EMA copy lacks ${missing.length} UNet weights (first: model_ema.` +
            `${
              emaKey(missing[0]).slice(SD15_PREFIXES.ema.length)
            }); open it without the EMA option`,
      );
    }
  }
  for (const [name, t] of unetOriginal) {
    const hf = unetToDiffusers(name);
    if (hf === undefined) {
      throw new CheckpointError(
        `${path}: ${SD15_PREFIXES.unet}${name} is not part of an SD 1.x UNet; ${SUPPORTED}`,
      );
    }
    if (useEma) {
      const key = emaKey(name);
      unet.set(hf, tensors.get(key)!);
      emaNames.delete(key);
      ignored.add(SD15_PREFIXES.unet + name, false);
    } else unet.set(hf, t);
  }
  for (const name of emaNames) ignored.add(name, false);
  const vae = mapOriginalVae(path, vaeOriginal, (n) => ignored.add(SD15_PREFIXES.vae + n, true));
  const parts = { unet, vae, textEncoder };
  refuseMissing(
    path,
    parts,
    false,
    [...tensors.keys()].some((n) => /^(encoder|decoder)\.(conv_in|mid)\./.test(n)),
  );
  refuseShapes(path, unet, textEncoder);
  refuseLayout(path, parts, (n) => ignored.add(SD15_PREFIXES.textEncoder + n, true));
  return {
    ...parts,
    layout: "original",
    format: wf.format,
    ema: useEma,
    ignored: ignored.value,
    close: () => wf.close(),
  };
}

/**
 * Maps an original-layout VAE (names without `first_stage_model.`) to
 * diffusers names, reshaping the mid-block attention's 1×1 convs to Linear
 * (diffusers `convert_ldm_vae_checkpoint` → `conv_attn_to_linear`). Names
 * outside the encoder/decoder/quant convs (a training `loss.*`) go to `skip`.
 */
function mapOriginalVae(
  path: string,
  original: Map<string, WeightTensor>,
  skip: (name: string) => void,
): Map<string, WeightTensor> {
  const levels = originalVaeLevels(original.keys());
  const out = new Map<string, WeightTensor>();
  for (const [name, t] of original) {
    const hf = vaeToDiffusers(name, levels);
    if (hf === undefined) {
      if (/^(encoder|decoder)\./.test(name)) {
        throw new CheckpointError(
          `${path}: VAE weight ${name} is not part of an SD 1.x VAE; supported: SD 1.x's ` +
            `AutoencoderKL in the original or diffusers layout`,
        );
      }
      skip(name);
      continue;
    }
    out.set(hf, linearFromConv(hf, t));
  }
  return out;
}

/** `[C, C, 1, 1]` → `[C, C]` for the mid-block attention projections; other tensors as they are. */
function linearFromConv(hf: string, t: WeightTensor): WeightTensor {
  if (
    isVaeAttentionProjection(hf) && t.shape.length === 4 && t.shape[2] === 1 && t.shape[3] === 1
  ) {
    return reshaped(t, [t.shape[0], t.shape[1]]);
  }
  return t;
}

/** A diffusers-named VAE with older attention names made current and 1×1-conv projections as Linear. */
function mapDiffusersVae(map: WeightMap, skip: (name: string) => void): Map<string, WeightTensor> {
  const out = new Map<string, WeightTensor>();
  for (const [name, t] of map) {
    if (!/^(encoder|decoder|quant_conv|post_quant_conv)\./.test(name)) {
      skip(name);
      continue;
    }
    const hf = normaliseDiffusersVaeName(name);
    out.set(hf, linearFromConv(hf, t));
  }
  return out;
}

// ---- diffusers folders ----

/** Weights file names diffusers and transformers write, in the order they are preferred. */
function weightCandidates(stem: string): string[] {
  return [
    `${stem}.safetensors`,
    `${stem}.fp16.safetensors`,
    `${stem}.bin`,
    `${stem}.fp16.bin`,
  ];
}

/**
 * Opens the weights of one diffusers component folder (`unet/`, `vae/`,
 * `text_encoder/`): a single file or shards listed by an `*.index.json`.
 */
async function openComponent(dir: string, stems: string[]): Promise<WeightFile | undefined> {
  let entries: string[];
  try {
    entries = await readdir(dir);
  } catch {
    return undefined;
  }
  for (const stem of stems) {
    for (const name of weightCandidates(stem)) {
      if (entries.includes(name)) return await openWeightFile(join(dir, name));
      const index = `${name}.index.json`;
      if (entries.includes(index)) return await openShards(dir, index);
    }
  }
  return undefined;
}

/** Opens the shards an `*.index.json` lists (`{"weight_map": {name: file}}`) as one map. */
async function openShards(dir: string, index: string): Promise<WeightFile> {
  const path = join(dir, index);
  let weightMap: Record<string, unknown>;
  try {
    weightMap = JSON.parse(await readFile(path, "utf-8")).weight_map;
    if (weightMap === null || typeof weightMap !== "object") {
      throw new Error("no weight_map object");
    }
  } catch (e) {
    throw new CheckpointError(`${path}: not a shard index: ${(e as Error).message}`);
  }
  const files = [...new Set(Object.values(weightMap).map(String))];
  const opened: WeightFile[] = [];
  try {
    for (const f of files) {
      if (f.includes("/") || f.includes("\\")) {
        throw new CheckpointError(`${path}: shard ${f} is outside the folder`);
      }
      opened.push(await openWeightFile(join(dir, f)));
    }
  } catch (e) {
    for (const o of opened) o.close();
    throw e;
  }
  const tensors = new Map<string, WeightTensor>();
  for (const o of opened) for (const [k, v] of o.tensors) tensors.set(k, v);
  return {
    tensors,
    format: opened[0]?.format ?? "safetensors",
    close: () => opened.forEach((o) => o.close()),
  };
}

async function openDiffusersFolder(path: string, opts: Sd15Options): Promise<Sd15Checkpoint> {
  let index: Record<string, unknown>;
  try {
    index = JSON.parse(await readFile(join(path, "model_index.json"), "utf-8"));
  } catch (e) {
    throw new CheckpointError(
      `${path}: a folder without a readable model_index.json (${
        (e as Error).message
      }); ${SUPPORTED}`,
    );
  }
  const cls = String(index._class_name ?? "");
  if (/XL/.test(cls) || "text_encoder_2" in index) {
    throw new CheckpointError(
      `${path}: an SDXL diffusers folder (${cls || "text_encoder_2"}); ${SUPPORTED}`,
    );
  }
  // Optimum's ONNX exports have a model_index.json too: they are not weights to convert.
  if (await stat(join(path, "unet", "model.onnx")).then(() => true, () => false)) {
    throw new CheckpointError(
      `${path}: an ONNX export (unet/model.onnx), not a diffusers checkpoint folder; ${SUPPORTED}`,
    );
  }
  if (opts.ema) {
    throw new CheckpointError(
      `${path}: a diffusers folder has no EMA copy; open it without the EMA option`,
    );
  }
  const opened: WeightFile[] = [];
  const close = () => opened.forEach((o) => o.close());
  try {
    const parts: Record<"unet" | "vae" | "textEncoder", WeightMap> = {
      unet: new Map(),
      vae: new Map(),
      textEncoder: new Map(),
    };
    const dirs = { unet: "unet", vae: "vae", textEncoder: "text_encoder" } as const;
    const ignored = new Ignored();
    for (const part of ["unet", "vae", "textEncoder"] as const) {
      const stems = part === "textEncoder"
        ? ["model", "pytorch_model"]
        : ["diffusion_pytorch_model"];
      const wf = await openComponent(join(path, dirs[part]), stems);
      if (!wf) continue;
      opened.push(wf);
      refuseForeign(join(path, dirs[part]), wf.tensors);
      if (part === "vae") {
        parts.vae = mapDiffusersVae(wf.tensors, (n) => ignored.add(`vae/${n}`, true));
      } else if (part === "textEncoder") {
        const te = new Map<string, WeightTensor>();
        for (const [k, v] of wf.tensors) {
          // Files saved by older transformers versions lack the `text_model.` level.
          const hf = textEncoderToDiffusers(k);
          if (hf === undefined || TEXT_ENCODER_BUFFERS.test(hf)) {
            ignored.add(`text_encoder/${k}`, true);
          } else te.set(hf, v);
        }
        parts.textEncoder = te;
      } else parts.unet = wf.tensors;
    }
    refuseMissing(path, parts, true);
    refuseShapes(path, parts.unet, parts.textEncoder);
    refuseLayout(path, parts, (n) => ignored.add(`text_encoder/${n}`, true));
    return {
      ...parts,
      layout: "diffusers-folder",
      format: opened[0].format,
      ema: false,
      ignored: ignored.value,
      close,
    };
  } catch (e) {
    close();
    throw e;
  }
}

// ---- standalone VAE ----

/**
 * Opens a standalone VAE: a file in the original layout (`encoder.*`,
 * `decoder.*`, `quant_conv.*`, `post_quant_conv.*`, like
 * `vae-ft-mse-840000-ema-pruned`), a file with diffusers `AutoencoderKL`
 * names, or a diffusers `vae/` folder (or a pipeline folder, whose `vae/`
 * is taken). Training leftovers (`loss.*`, `model_ema.*`) are ignored.
 *
 * @throws CheckpointError when it is not a whole SD 1.x VAE
 */
export async function openVaeWeights(path: string): Promise<VaeWeights> {
  const info = await stat(path).catch((e) => {
    throw new CheckpointError(`${path}: cannot be read: ${(e as Error).message}`);
  });
  let wf: WeightFile | undefined;
  if (info.isDirectory()) {
    wf = await openComponent(path, ["diffusion_pytorch_model"]) ??
      await openComponent(join(path, "vae"), ["diffusion_pytorch_model"]);
    if (!wf) {
      throw new CheckpointError(
        `${path}: a folder without diffusion_pytorch_model.safetensors or .bin (nor a vae/ folder with one); ` +
          `supported: a VAE file or a diffusers vae/ folder`,
      );
    }
  } else wf = await openWeightFile(path);
  try {
    refuseForeign(path, wf.tensors);
    let names = [...wf.tensors.keys()];
    let source: WeightMap = wf.tensors;
    // A whole checkpoint given as a VAE: its first_stage_model part is the VAE.
    if (names.some((n) => n.startsWith(SD15_PREFIXES.vae))) {
      source = new Map(
        [...wf.tensors].filter(([k]) => k.startsWith(SD15_PREFIXES.vae)).map((
          [k, v],
        ) => [k.slice(SD15_PREFIXES.vae.length), v]),
      );
      names = [...source.keys()];
    }
    const diffusersNames = names.some((n) =>
      /^(encoder|decoder)\.(up_blocks|down_blocks|mid_block)\./.test(n)
    );
    const skip = () => {};
    const vae = diffusersNames
      ? mapDiffusersVae(source, skip)
      : mapOriginalVae(path, new Map(source), skip);
    const lacks = REQUIRED.vae.filter((k) => !vae.has(k));
    if (lacks.length > 0) {
      throw new CheckpointError(
        `${path}: not a whole SD 1.x VAE (no ${lacks.join(", ")}); supported: a VAE file with ` +
          `encoder, decoder, quant_conv and post_quant_conv weights (original or diffusers names)`,
      );
    }
    const widths = { ...SD15_WIDTHS, vaeWidth: vae.get("encoder.conv_in.weight")!.shape[0] };
    const wrong = shapeMismatch(vae, sd15Shapes(widths).vae);
    if (wrong) {
      throw new CheckpointError(
        `${path}: not an SD 1.x VAE: ${wrong}; supported: SD 1.x's AutoencoderKL (original or ` +
          `diffusers names)`,
      );
    }
    const opened = wf;
    return { vae, close: () => opened.close() };
  } catch (e) {
    wf.close();
    throw e;
  }
}
