/**
 * Tiny kohya-format LoRA files for tests, in the safetensors layout
 * (huggingface/safetensors README "Format": 8-byte little-endian header size,
 * a JSON header `{name: {dtype, shape, data_offsets: [begin, end]}}` padded
 * with spaces to a multiple of 8, then the little-endian tensor bytes).
 *
 * Keys follow kohya sd-scripts `networks/lora.py`: `lora_unet_<module path
 * with "." → "_">` / `lora_te_<…>` with `.lora_down.weight` ([rank, in] or
 * [rank, in, k, k]), `.lora_up.weight` ([out, rank] or [out, rank, 1, 1]) and
 * `.alpha` (a scalar).
 *
 * @module
 */

import { float32ToFloat16Bits } from "../onnx/mod.ts";
import { type ModelDims, TINY_DIMS } from "./options.ts";
import { Rng } from "../graph/rng.ts";
import { TEXT_ENCODER_SCOPES } from "./text_encoder.ts";
import { UNET_SCOPES } from "./unet.ts";

/** Element types the writer can store. */
export type SafetensorsDtype = "F32" | "F16";

/** One tensor to write. */
export interface SafetensorsEntry {
  /** Tensor name (the header key). */
  name: string;
  /** Stored element type; values are given as float32 and converted. */
  dtype: SafetensorsDtype;
  /** Shape; `[]` for a scalar. */
  shape: readonly number[];
  /** Values in row-major order. */
  data: Float32Array;
}

/** What {@link safetensorsLayout} computes. */
export interface SafetensorsLayout {
  /** The JSON header, padded with spaces so that 8 + its length is a multiple of 8. */
  header: Uint8Array;
  /** Bytes of tensor data after the header. */
  dataBytes: number;
  /** The whole file: 8 + header + data. */
  size: number;
}

/**
 * The header and size of a safetensors file with these tensors in this
 * order, without their values (so the size of a full-size file can be known
 * without making it).
 */
export function safetensorsLayout(
  entries: ReadonlyArray<Pick<SafetensorsEntry, "name" | "dtype" | "shape">>,
  metadata: Record<string, string> = {},
): SafetensorsLayout {
  const header: Record<string, unknown> = {};
  if (Object.keys(metadata).length > 0) header.__metadata__ = metadata;
  let offset = 0;
  for (const e of entries) {
    const bytes = e.shape.reduce((a, b) => a * b, 1) * (e.dtype === "F32" ? 4 : 2);
    header[e.name] = {
      dtype: e.dtype,
      shape: [...e.shape],
      data_offsets: [offset, offset + bytes],
    };
    offset += bytes;
  }
  let json = JSON.stringify(header);
  while ((8 + json.length) % 8 !== 0) json += " ";
  const head = new TextEncoder().encode(json);
  return { header: head, dataBytes: offset, size: 8 + head.length + offset };
}

/** Encodes tensors as one safetensors file (entries in the given order). */
export function encodeSafetensors(
  entries: readonly SafetensorsEntry[],
  metadata: Record<string, string> = {},
): Uint8Array {
  const blobs: Uint8Array[] = [];
  for (const e of entries) {
    const count = e.shape.reduce((a, b) => a * b, 1);
    if (count !== e.data.length) {
      throw new Error(`safetensors ${e.name}: ${e.data.length} values for shape [${e.shape}]`);
    }
    blobs.push(
      e.dtype === "F32"
        ? new Uint8Array(Float32Array.from(e.data).buffer)
        : new Uint8Array(float32ToFloat16Bits(e.data).buffer),
    );
  }
  const { header: head, dataBytes: offset } = safetensorsLayout(entries, metadata);
  const out = new Uint8Array(8 + head.length + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(head.length), true);
  out.set(head, 8);
  let at = 8 + head.length;
  for (const b of blobs) {
    out.set(b, at);
    at += b.length;
  }
  return out;
}

/** One module a tiny LoRA adapts: kohya key and the torch layer's shape. */
export interface TinyLoraModule {
  /** kohya key without suffix, e.g. `lora_unet_conv_in`. */
  key: string;
  /** torch Linear [out, in] or Conv2d [out, in, k, k]. */
  kind: "linear" | "conv";
  /** Input features / channels. */
  in: number;
  /** Output features / channels. */
  out: number;
  /** Conv kernel size (1 for linear). */
  k: number;
  /** The torch module path (`down_blocks.0/resnets.0/conv1`); empty for made-up modules. */
  scope: string;
}

const kohya = (prefix: "lora_unet_" | "lora_te_", scope: string) =>
  prefix + scope.replaceAll("/", "_").replaceAll(".", "_");

/** The modules of the tiny UNet and text encoder that carry torch-export names. */
export function tinyLoraModules(dims: ModelDims = TINY_DIMS): TinyLoraModule[] {
  const [c0, , c2] = dims.blockChannels;
  const half = Math.max(4, c0 >> 1); // as unet.ts `conditioning`
  const u = (scope: string) => ({ key: kohya("lora_unet_", scope), scope });
  return [
    { ...u(UNET_SCOPES.time1), kind: "linear", in: 2 * half, out: c0, k: 1 },
    { ...u(UNET_SCOPES.time2), kind: "linear", in: c0, out: c0, k: 1 },
    { ...u(UNET_SCOPES.textProj), kind: "linear", in: dims.hiddenSize, out: c0, k: 1 },
    { ...u(UNET_SCOPES.convIn), kind: "conv", in: 4, out: c0, k: 3 },
    { ...u(UNET_SCOPES.res1), kind: "conv", in: c0, out: c0, k: 3 },
    { ...u(UNET_SCOPES.mid), kind: "conv", in: c2, out: c2, k: 3 },
    { ...u(UNET_SCOPES.convOut), kind: "conv", in: c0, out: 4, k: 3 },
    {
      key: kohya("lora_te_", TEXT_ENCODER_SCOPES.mix),
      scope: TEXT_ENCODER_SCOPES.mix,
      kind: "linear",
      in: dims.hiddenSize,
      out: dims.hiddenSize,
      k: 1,
    },
  ];
}

/** Options of {@link buildTinyLora}. */
export interface TinyLoraOptions {
  /** Rank (rows of `lora_down`); default 2. */
  rank?: number;
  /** `.alpha` value; default 1; null writes no alpha (alpha = rank). */
  alpha?: number | null;
  /** Stored dtype; default F16 (as kohya saves). */
  dtype?: SafetensorsDtype;
  /** Which modules: "unet", "text_encoder" or "all" (default). */
  targets?: "unet" | "text_encoder" | "all";
  /** Adds a module no tiny model has (`lora_unet_not_a_module`), for partial-match tests. */
  unmatched?: boolean;
  /** Weight scale of the up/down values; default 0.5. */
  scale?: number;
  /** Channel widths; default {@link TINY_DIMS}. */
  dims?: ModelDims;
  /** The modules to adapt instead of the tiny ones (e.g. a full-size UNet's: `lcmLoraModules`). */
  modules?: readonly TinyLoraModule[];
  /**
   * Key layout: kohya (default, `lora_unet_<path>.lora_down.weight`) or
   * diffusers/PEFT (`unet.<module>.lora_A.weight` / `.lora_B.weight`, no
   * alpha tensors: alpha = rank). Same factors, same update, either way
   * when `alpha` equals the rank.
   */
  layout?: "kohya" | "peft";
  /**
   * Write the tensors sorted by name with `{"format": "pt"}` metadata, as
   * the Python `safetensors` library saves a torch state dict (default: the
   * module order, with kohya's `ss_network_module`).
   */
  torchSaved?: boolean;
}

/** kohya keys of a LoRA's tensors, with their shapes, for `modules` at `rank`. */
export function kohyaLoraTensors(
  modules: readonly TinyLoraModule[],
  rank: number,
  dtype: SafetensorsDtype,
  alpha: boolean,
): Array<Pick<SafetensorsEntry, "name" | "dtype" | "shape">> {
  return modules.flatMap((m) => {
    const conv = m.kind === "conv";
    return [
      {
        name: `${m.key}.lora_down.weight`,
        dtype,
        shape: conv ? [rank, m.in, m.k, m.k] : [rank, m.in],
      },
      { name: `${m.key}.lora_up.weight`, dtype, shape: conv ? [m.out, rank, 1, 1] : [m.out, rank] },
      ...(alpha ? [{ name: `${m.key}.alpha`, dtype, shape: [] }] : []),
    ];
  });
}

/**
 * A stand-in for ByteDance's Hyper-SD unified SD 1.5 LoRA
 * (`Hyper-SD15-1step-lora.safetensors`) in its layout: kohya keys for the
 * modules an LCM LoRA adapts, float32 values and alphas (alpha = rank),
 * sorted by name with `{"format": "pt"}` metadata. With the full-size
 * UNet's 278 such modules at rank 64 this layout is exactly the published
 * file's 269,127,096 bytes (`lora_test.ts`); `scale` keeps a random-weight
 * update small.
 */
export function buildHyperSdLora(
  seed: number,
  options: {
    modules?: readonly TinyLoraModule[];
    rank?: number;
    scale?: number;
    dims?: ModelDims;
  } = {},
): Uint8Array {
  const rank = options.rank ?? 64;
  return buildTinyLora(seed, {
    modules: options.modules,
    dims: options.dims,
    rank,
    alpha: rank,
    dtype: "F32",
    targets: "unet",
    scale: options.scale,
    torchSaved: true,
  });
}

/** kohya key → diffusers/PEFT module prefix: `lora_unet_…` → `unet.<dotted module path>`. */
function peftName(m: TinyLoraModule): string {
  const scope = m.key.startsWith("lora_unet_") ? `unet.${m.scope}` : `text_encoder.${m.scope}`;
  return scope.replaceAll("/", ".");
}

/**
 * Builds a deterministic kohya-format LoRA for the tiny UNet / text encoder
 * (seeded uniform up/down weights; same arguments, same bytes).
 */
export function buildTinyLora(seed: number, options: TinyLoraOptions = {}): Uint8Array {
  const rank = options.rank ?? 2;
  const alpha = options.alpha === undefined ? 1 : options.alpha;
  const dtype = options.dtype ?? "F16";
  const targets = options.targets ?? "all";
  const scale = options.scale ?? 0.5;
  const rng = new Rng(seed, "lora");
  const modules = (options.modules ? [...options.modules] : tinyLoraModules(options.dims)).filter(
    (m) => targets === "all" || (targets === "unet") === m.key.startsWith("lora_unet_"),
  );
  if (options.unmatched) {
    modules.push({
      key: "lora_unet_not_a_module",
      scope: "not_a_module",
      kind: "linear",
      in: 4,
      out: 4,
      k: 1,
    });
  }
  const entries: SafetensorsEntry[] = [];
  for (const m of modules) {
    const conv = m.kind === "conv";
    const downShape = conv ? [rank, m.in, m.k, m.k] : [rank, m.in];
    const upShape = conv ? [m.out, rank, 1, 1] : [m.out, rank];
    const n = (s: number[]) => s.reduce((a, b) => a * b, 1);
    if (options.layout === "peft") {
      const name = peftName(m);
      entries.push({
        name: `${name}.lora_A.weight`,
        dtype,
        shape: downShape,
        data: rng.uniform(n(downShape), scale),
      });
      entries.push({
        name: `${name}.lora_B.weight`,
        dtype,
        shape: upShape,
        data: rng.uniform(n(upShape), scale),
      });
      continue;
    }
    entries.push({
      name: `${m.key}.lora_down.weight`,
      dtype,
      shape: downShape,
      data: rng.uniform(n(downShape), scale),
    });
    entries.push({
      name: `${m.key}.lora_up.weight`,
      dtype,
      shape: upShape,
      data: rng.uniform(n(upShape), scale),
    });
    if (alpha !== null) {
      entries.push({ name: `${m.key}.alpha`, dtype, shape: [], data: Float32Array.of(alpha) });
    }
  }
  if (options.torchSaved) {
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    return encodeSafetensors(entries, { format: "pt" });
  }
  return encodeSafetensors(
    entries,
    options.layout === "peft" ? { format: "pt" } : { ss_network_module: "networks.lora" },
  );
}
