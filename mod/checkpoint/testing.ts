/**
 * Test tooling (never imported by product code): a small SD 1.x-shaped
 * weight set under diffusers' names (real SD 1.5 key names, tiny widths),
 * written in the original single-file layout (the inverse of the reading
 * map, as diffusers' `scripts/convert_diffusers_to_original_stable_diffusion.py`
 * writes it) as safetensors in fp32/fp16/bf16 or as a PyTorch `.ckpt`, and
 * as a diffusers folder; plus a minimal writer of PyTorch zip and legacy
 * files (pickle protocol 2 and raw storages) that can also name any global,
 * for the refusal tests.
 *
 * @module
 */

import { type FileHandle, mkdir, open, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { float32ToFloat16Bits } from "../onnx/fp16.ts";
import { DTYPE_BYTES, type WeightDtype } from "./dtype.ts";
import { sd15Shapes } from "./sd15_shapes.ts";
import {
  emaKey,
  isVaeAttentionProjection,
  SD15_PREFIXES,
  unetToOriginal,
  vaeToOriginal,
} from "./sd15_keys.ts";

/** A tensor held in memory by the test tooling. */
export interface TestTensor {
  /** Shape. */
  shape: number[];
  /** Values (row-major). */
  data: Float32Array;
}

/** A small SD 1.x model under diffusers' names. */
export interface TestSd15 {
  /** UNet2DConditionModel names. */
  unet: Map<string, TestTensor>;
  /** AutoencoderKL names. */
  vae: Map<string, TestTensor>;
  /** CLIPTextModel names (`text_model.*`). */
  textEncoder: Map<string, TestTensor>;
}

/** Widths of {@link testSd15}; defaults are tiny. */
export interface TestSd15Options {
  /** UNet base width (block widths ×1, ×2, ×4, ×4 as SD 1.x's 320/640/1280/1280). Default 4. */
  unetWidth?: number;
  /** Cross-attention context = text-encoder width. Default 32 (768 in SD 1.x). */
  context?: number;
  /** UNet input channels (4; 9 makes an inpainting UNet, 8 instruct-pix2pix). */
  inChannels?: number;
  /** VAE base width (×1, ×2, ×4, ×4 as 128/256/512/512). Default 4. */
  vaeWidth?: number;
  /** Text-encoder layers. Default 2 (12 in SD 1.x). */
  textLayers?: number;
  /** Vocabulary rows. Default 16 (49408 in SD 1.x). */
  vocab?: number;
  /** Positions. Default 8 (77 in SD 1.x). */
  positions?: number;
  /** Include transformers' `text_model.embeddings.position_ids` buffer (int64). */
  positionIds?: boolean;
  /**
   * Make each tensor's values when they are read instead of now, so a
   * full-size model (`unetWidth` 320, `context` 768, `vaeWidth` 128,
   * `textLayers` 12, `vocab` 49408, `positions` 77) can be written tensor by
   * tensor ({@link writeOriginalSafetensors}).
   */
  lazy?: boolean;
}

/**
 * Values exactly representable in fp16 and bf16 (multiples of 1/64 in
 * [-2, 2]), different for each name, so a round trip through any dtype
 * compares exactly and a mixed-up name shows.
 */
export function testValues(name: string, count: number, salt = 0): Float32Array {
  let h = 2166136261 ^ salt;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619);
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) {
    h = Math.imul(h ^ (h >>> 15), 2246822507) ^ i;
    out[i] = (((h >>> 0) % 257) - 128) / 64;
  }
  return out;
}

/** A tensor whose values are made each time they are asked for (a full-size model never sits in memory). */
function lazyTensor(shape: number[], make: () => Float32Array, dtype?: WeightDtype): TestTensor {
  const t = {
    shape,
    get data() {
      return make();
    },
  };
  return dtype ? Object.assign(t, { dtype }) : t;
}

/**
 * A small SD 1.x model with every tensor name of the real one (the shapes of
 * {@link sd15Shapes} at the given widths) and {@link testValues} values.
 */
export function testSd15(opts: TestSd15Options = {}): TestSd15 {
  const shapes = sd15Shapes({
    unetWidth: opts.unetWidth ?? 4,
    inChannels: opts.inChannels ?? 4,
    context: opts.context ?? 32,
    vaeWidth: opts.vaeWidth ?? 4,
    textLayers: opts.textLayers ?? 2,
    vocab: opts.vocab ?? 16,
    positions: opts.positions ?? 8,
  });
  const fill = (m: Map<string, number[]>) =>
    new Map(
      [...m].map(([name, shape]): [string, TestTensor] => {
        const count = shape.reduce((a, b) => a * b, 1);
        return [
          name,
          opts.lazy
            ? lazyTensor(shape, () => testValues(name, count))
            : { shape, data: testValues(name, count) },
        ];
      }),
    );
  const textEncoder = fill(shapes.textEncoder);
  if (opts.positionIds) {
    const n = opts.positions ?? 8;
    textEncoder.set("text_model.embeddings.position_ids", {
      shape: [1, n],
      data: Float32Array.from({ length: n }, (_, i) => i),
    });
  }
  return { unet: fill(shapes.unet), vae: fill(shapes.vae), textEncoder };
}

// ---- encoding ----

/** Float32 values as the little-endian bytes of `dtype` (F32, F16, BF16 rounded to nearest even; I64 for buffers). */
export function encodeAs(data: Float32Array, dtype: WeightDtype): Uint8Array {
  switch (dtype) {
    case "F32":
      return new Uint8Array(data.slice().buffer);
    case "F16":
      return new Uint8Array(float32ToFloat16Bits(data).buffer);
    case "BF16": {
      const bits = new Uint32Array(data.slice().buffer);
      const out = new Uint16Array(data.length);
      for (let i = 0; i < bits.length; i++) {
        const b = bits[i];
        out[i] = (b + 0x7fff + ((b >>> 16) & 1)) >>> 16;
      }
      return new Uint8Array(out.buffer);
    }
    case "F64":
      return new Uint8Array(Float64Array.from(data).buffer);
    case "I64":
      return new Uint8Array(BigInt64Array.from(data, (x) => BigInt(Math.round(x))).buffer);
    case "I32":
      return new Uint8Array(Int32Array.from(data).buffer);
    case "I16":
      return new Uint8Array(Int16Array.from(data).buffer);
    case "I8":
      return new Uint8Array(Int8Array.from(data).buffer);
    case "U8":
    case "BOOL":
      return Uint8Array.from(data);
  }
}

/** One tensor to write. */
export interface WriteTensor extends TestTensor {
  /** Stored dtype. */
  dtype: WeightDtype;
}

/** The 8-byte size and JSON header of `tensors`, padded to 8 bytes as the reference writer does. */
function safetensorsHead(
  tensors: readonly [string, WriteTensor][],
  metadata?: Record<string, string>,
): { head: Uint8Array; dataBytes: number } {
  const header: Record<string, unknown> = {};
  if (metadata) header.__metadata__ = metadata;
  let offset = 0;
  for (const [name, t] of tensors) {
    const size = t.shape.reduce((a, b) => a * b, 1) * DTYPE_BYTES[t.dtype];
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + size] };
    offset += size;
  }
  let json = new TextEncoder().encode(JSON.stringify(header));
  const padded = new Uint8Array(Math.ceil(json.length / 8) * 8).fill(0x20);
  padded.set(json);
  json = padded;
  const head = new Uint8Array(8 + json.length);
  new DataView(head.buffer).setBigUint64(0, BigInt(json.length), true);
  head.set(json, 8);
  return { head, dataBytes: offset };
}

/** One tensor's stored bytes, checked against its shape. */
function tensorBytes(name: string, t: WriteTensor): Uint8Array {
  const data = t.data;
  const bytes = encodeAs(data, t.dtype);
  if (bytes.length !== t.shape.reduce((a, b) => a * b, 1) * DTYPE_BYTES[t.dtype]) {
    throw new RangeError(`${name}: ${data.length} values for shape [${t.shape}]`);
  }
  return bytes;
}

/** Writes all of `bytes` (a write may take fewer than it is given). */
async function writeAll(file: FileHandle, bytes: Uint8Array): Promise<void> {
  for (let done = 0; done < bytes.length;) {
    done += (await file.write(bytes, done, bytes.length - done)).bytesWritten;
  }
}

/** Safetensors bytes of `tensors` (in the given order). */
export function safetensorsBytes(
  tensors: Iterable<[string, WriteTensor]>,
  metadata?: Record<string, string>,
): Uint8Array {
  const list = [...tensors];
  const { head, dataBytes } = safetensorsHead(list, metadata);
  const out = new Uint8Array(head.length + dataBytes);
  out.set(head);
  let at = head.length;
  for (const [name, t] of list) {
    const b = tensorBytes(name, t);
    out.set(b, at);
    at += b.length;
  }
  return out;
}

/**
 * Writes a safetensors file tensor by tensor: only one tensor's values are
 * in memory at a time (with a lazy {@link testSd15}, a full-size model).
 */
export async function writeSafetensorsFile(
  path: string,
  tensors: Iterable<[string, WriteTensor]>,
  metadata?: Record<string, string>,
): Promise<void> {
  const list = [...tensors];
  const { head } = safetensorsHead(list, metadata);
  const file = await open(path, "w");
  try {
    await writeAll(file, head);
    for (const [name, t] of list) await writeAll(file, tensorBytes(name, t));
  } finally {
    await file.close();
  }
}

// ---- the original layout ----

/** How {@link originalLayout} writes a model. */
export interface OriginalLayoutOptions {
  /** Stored float dtype. Default F32. */
  dtype?: "F32" | "F16" | "BF16";
  /** Add EMA copies of the UNet (`model_ema.*`, values +0.25 so a test can tell them apart) with `decay`/`num_updates`. */
  ema?: boolean;
  /** Text encoder as `cond_stage_model.transformer.*` without `text_model.` (older files). */
  oldTextEncoderKeys?: boolean;
  /** Scheduler buffers (`betas`, `alphas_cumprod`, …), `loss.logvar` and `model_ema.*` counters as extra keys. */
  extraKeys?: boolean;
  /** Names prefixed by `state_dict.` (the wrapper, as a flattened safetensors file shows it). */
  stateDictWrapper?: boolean;
  /** Leave a part out. */
  omit?: ("unet" | "vae" | "textEncoder")[];
}

/** The EMA copy's offset from the regular weights in {@link originalLayout}. */
export const EMA_OFFSET = 0.25;

/**
 * A model in the original single-file layout (names and the VAE attention
 * reshaped to 1×1 convs, as diffusers' `convert_diffusers_to_original_stable_diffusion.py`
 * writes it), as an ordered list of tensors to write.
 */
export function originalLayout(
  model: TestSd15,
  opts: OriginalLayoutOptions = {},
): [string, WriteTensor][] {
  const dtype = opts.dtype ?? "F32";
  const out: [string, WriteTensor][] = [];
  const omit = new Set(opts.omit ?? []);
  // Values are passed through lazily: nothing is read here, so a lazy model stays unmade.
  const add = (name: string, t: TestTensor, d: WeightDtype = dtype) =>
    out.push([
      (opts.stateDictWrapper ? "state_dict." : "") + name,
      lazyTensor(t.shape, () => t.data, d) as WriteTensor,
    ]);
  if (!omit.has("unet")) {
    for (const [hf, t] of model.unet) {
      const sd = unetToOriginal(hf);
      if (sd === undefined) throw new Error(`no original name for UNet ${hf}`);
      add(SD15_PREFIXES.unet + sd, t);
      if (opts.ema) {
        add(emaKey(sd), lazyTensor(t.shape, () => t.data.map((x) => x + EMA_OFFSET)));
      }
    }
  }
  if (!omit.has("vae")) {
    for (const [hf, t] of model.vae) {
      const sd = vaeToOriginal(hf);
      if (sd === undefined) throw new Error(`no original name for VAE ${hf}`);
      const shape = isVaeAttentionProjection(hf) ? [...t.shape, 1, 1] : t.shape;
      add(SD15_PREFIXES.vae + sd, lazyTensor(shape, () => t.data));
    }
  }
  if (!omit.has("textEncoder")) {
    for (const [hf, t] of model.textEncoder) {
      const name = opts.oldTextEncoderKeys ? hf.slice("text_model.".length) : hf;
      add(SD15_PREFIXES.textEncoder + name, t, hf.endsWith("position_ids") ? "I64" : dtype);
    }
  }
  if (opts.ema) {
    add("model_ema.decay", { shape: [], data: Float32Array.of(0.9999) }, "F32");
    add("model_ema.num_updates", { shape: [], data: Float32Array.of(1000) }, "I32");
  }
  if (opts.extraKeys) {
    const steps = 4;
    for (const b of ["betas", "alphas_cumprod", "alphas_cumprod_prev", "sqrt_alphas_cumprod"]) {
      add(b, { shape: [steps], data: testValues(b, steps) }, "F32");
    }
    add("loss.logvar", { shape: [steps], data: testValues("logvar", steps) }, "F32");
  }
  return out;
}

/** Writes {@link originalLayout} as a safetensors file. */
export async function writeOriginalSafetensors(
  path: string,
  model: TestSd15,
  opts: OriginalLayoutOptions = {},
): Promise<void> {
  await writeSafetensorsFile(path, originalLayout(model, opts));
}

/** A standalone VAE in the original layout (no `first_stage_model.`), optionally with a training `loss.*` tensor. */
export function originalVaeLayout(
  vae: Map<string, TestTensor>,
  dtype: "F32" | "F16" | "BF16" = "F32",
  withLoss = false,
): [string, WriteTensor][] {
  const out: [string, WriteTensor][] = [];
  for (const [hf, t] of vae) {
    const sd = vaeToOriginal(hf);
    if (sd === undefined) throw new Error(`no original name for VAE ${hf}`);
    const shape = isVaeAttentionProjection(hf) ? [...t.shape, 1, 1] : t.shape;
    out.push([sd, { shape, data: t.data, dtype }]);
  }
  if (withLoss) out.push(["loss.logvar", { shape: [1], data: Float32Array.of(0), dtype: "F32" }]);
  return out;
}

/** A diffusers VAE's tensors with the older attention names (`group_norm`, `query`, `key`, `value`, `proj_attn`). */
export function olderDiffusersVae(vae: Map<string, TestTensor>): Map<string, TestTensor> {
  const rename: Record<string, string> = {
    to_q: "query",
    to_k: "key",
    to_v: "value",
    "to_out.0": "proj_attn",
  };
  return new Map(
    [...vae].map(([k, v]) => {
      const m = /^(.*\.mid_block\.attentions\.0\.)(to_q|to_k|to_v|to_out\.0)(\..*)$/.exec(k);
      return [m ? m[1] + rename[m[2]] + m[3] : k, v];
    }),
  );
}

/** Tensors as `WriteTensor`s of one dtype. */
export function asWrite(
  map: Map<string, TestTensor>,
  dtype: WeightDtype = "F32",
): [string, WriteTensor][] {
  // Lazily: a lazy model's values are made only when written.
  return [...map].map((
    [k, t],
  ) => [
    k,
    lazyTensor(t.shape, () => t.data, k.endsWith("position_ids") ? "I64" : dtype) as WriteTensor,
  ]);
}

/** How {@link writeDiffusersFolder} writes the weights. */
export interface DiffusersFolderOptions {
  /** Stored float dtype. Default F32. */
  dtype?: "F32" | "F16" | "BF16";
  /** Write `*.bin` PyTorch zip files instead of safetensors. */
  bin?: boolean;
  /** Leave a component folder out. */
  omit?: ("unet" | "vae" | "textEncoder")[];
}

/** Writes a diffusers folder: `model_index.json`, `unet/`, `vae/`, `text_encoder/` (weights and a small config). */
export async function writeDiffusersFolder(
  dir: string,
  model: TestSd15,
  opts: DiffusersFolderOptions = {},
): Promise<void> {
  await mkdir(dir, { recursive: true });
  await writeFile(
    join(dir, "model_index.json"),
    JSON.stringify({
      _class_name: "StableDiffusionPipeline",
      unet: ["diffusers", "UNet2DConditionModel"],
      vae: ["diffusers", "AutoencoderKL"],
      text_encoder: ["transformers", "CLIPTextModel"],
      tokenizer: ["transformers", "CLIPTokenizer"],
      scheduler: ["diffusers", "PNDMScheduler"],
    }),
  );
  const parts = [
    ["unet", "unet", "diffusion_pytorch_model", model.unet],
    ["vae", "vae", "diffusion_pytorch_model", model.vae],
    ["textEncoder", "text_encoder", opts.bin ? "pytorch_model" : "model", model.textEncoder],
  ] as const;
  for (const [part, sub, stem, map] of parts) {
    if (opts.omit?.includes(part)) continue;
    await mkdir(join(dir, sub), { recursive: true });
    await writeFile(join(dir, sub, "config.json"), "{}");
    const tensors = asWrite(map, opts.dtype ?? "F32");
    if (opts.bin) await writeTorchFile(join(dir, sub, `${stem}.bin`), stateDict(tensors));
    else await writeSafetensorsFile(join(dir, sub, `${stem}.safetensors`), tensors);
  }
}

// ---- PyTorch files ----

/** A Python value the pickle writer can write. */
export type PyValue =
  | string
  | number
  | boolean
  | null
  | PyValue[]
  | { int: bigint }
  | { float: number }
  | { tuple: PyValue[] }
  | { dict: [PyValue, PyValue][]; ordered?: boolean }
  | { tensor: WriteTensor; stride?: number[]; storageOffset?: number; parameter?: boolean }
  | { global: [string, string] }
  | { reduce: [PyValue, PyValue[]] };

/** A state dict (`collections.OrderedDict` of tensors) as a {@link PyValue}. */
export function stateDict(tensors: Iterable<[string, WriteTensor]>): PyValue {
  return { dict: [...tensors].map(([k, t]) => [k, { tensor: t }]), ordered: true };
}

/** PyTorch storage class names by dtype (`torch.FloatStorage`, …). */
const STORAGE: Record<WeightDtype, string> = {
  F64: "DoubleStorage",
  F32: "FloatStorage",
  F16: "HalfStorage",
  BF16: "BFloat16Storage",
  I64: "LongStorage",
  I32: "IntStorage",
  I16: "ShortStorage",
  I8: "CharStorage",
  U8: "ByteStorage",
  BOOL: "BoolStorage",
};

/** Pickle protocol 2 writer with the persistent ids `torch.save` writes for storages. */
class PickleWriter {
  readonly #out: number[] = [];
  /** Storages in key order; each one's bytes are made when written. */
  readonly storages: { key: string; bytes: () => Uint8Array; dtype: WeightDtype; numel: number }[] =
    [];
  constructor(readonly legacy: boolean) {}

  byte(...b: number[]): void {
    this.#out.push(...b);
  }
  u32(n: number): void {
    this.byte(n & 255, (n >>> 8) & 255, (n >>> 16) & 255, (n >>> 24) & 255);
  }
  str(s: string): void {
    const b = new TextEncoder().encode(s);
    this.byte(0x58); // BINUNICODE
    this.u32(b.length);
    for (const x of b) this.byte(x);
  }
  global(module: string, name: string): void {
    this.byte(0x63); // GLOBAL
    for (const x of new TextEncoder().encode(`${module}\n${name}\n`)) this.byte(x);
  }
  int(n: number | bigint): void {
    const v = BigInt(n);
    if (v >= 0n && v < 256n) this.byte(0x4b, Number(v)); // BININT1
    else if (v >= -(2n ** 31n) && v < 2n ** 31n) {
      this.byte(0x4a); // BININT
      this.u32(Number(BigInt.asUintN(32, v)));
    } else {
      // LONG1: little-endian two's complement, as short as it goes.
      const bytes: number[] = [];
      let x = v;
      for (;;) {
        bytes.push(Number(BigInt.asUintN(8, x)));
        x >>= 8n;
        const top = bytes[bytes.length - 1];
        if ((x === 0n && top < 128) || (x === -1n && top >= 128)) break;
      }
      this.byte(0x8a, bytes.length, ...bytes);
    }
  }
  tuple(items: PyValue[]): void {
    this.byte(0x28); // MARK
    for (const i of items) this.value(i);
    this.byte(0x74); // TUPLE
  }
  value(v: PyValue): void {
    if (v === null) return this.byte(0x4e);
    if (v === true) return this.byte(0x88);
    if (v === false) return this.byte(0x89);
    if (typeof v === "string") return this.str(v);
    if (typeof v === "number") {
      if (Number.isInteger(v)) return this.int(v);
      return this.value({ float: v });
    }
    if (Array.isArray(v)) {
      this.byte(0x5d, 0x28); // EMPTY_LIST MARK
      for (const i of v) this.value(i);
      return this.byte(0x65); // APPENDS
    }
    if ("int" in v) return this.int(v.int);
    if ("float" in v) {
      this.byte(0x47); // BINFLOAT, big-endian
      const b = new Uint8Array(8);
      new DataView(b.buffer).setFloat64(0, v.float, false);
      return this.byte(...b);
    }
    if ("tuple" in v) return this.tuple(v.tuple);
    if ("global" in v) return this.global(...v.global);
    if ("reduce" in v) {
      this.value(v.reduce[0]);
      this.tuple(v.reduce[1]);
      return this.byte(0x52); // REDUCE
    }
    if ("dict" in v) {
      if (v.ordered) {
        this.global("collections", "OrderedDict");
        this.byte(0x29, 0x52); // EMPTY_TUPLE REDUCE
      } else this.byte(0x7d); // EMPTY_DICT
      this.byte(0x28); // MARK
      for (const [k, x] of v.dict) {
        this.value(k);
        this.value(x);
      }
      return this.byte(0x75); // SETITEMS
    }
    // A tensor: _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, hooks)
    const t = v.tensor;
    const key = String(this.storages.length);
    const numel = t.shape.reduce((a, b) => a * b, 1) + (v.storageOffset ?? 0);
    const bytes = () => {
      const b = new Uint8Array(numel * DTYPE_BYTES[t.dtype]);
      b.set(encodeAs(t.data, t.dtype), (v.storageOffset ?? 0) * DTYPE_BYTES[t.dtype]);
      return b;
    };
    this.storages.push({ key, bytes, dtype: t.dtype, numel });
    if (v.parameter) this.global("torch._utils", "_rebuild_parameter");
    this.global("torch._utils", "_rebuild_tensor_v2");
    this.byte(0x28); // MARK
    // persistent id ('storage', torch.XStorage, key, 'cpu', numel[, view_metadata])
    this.byte(0x28);
    this.str("storage");
    this.global("torch", STORAGE[t.dtype]);
    this.str(key);
    this.str("cpu");
    this.int(numel);
    if (this.legacy) this.byte(0x4e);
    this.byte(0x74, 0x51); // TUPLE BINPERSID
    this.int(v.storageOffset ?? 0);
    this.tuple(t.shape);
    this.tuple(v.stride ?? contiguousStride(t.shape));
    this.byte(0x89); // False
    this.global("collections", "OrderedDict");
    this.byte(0x29, 0x52); // EMPTY_TUPLE REDUCE
    this.byte(0x74, 0x52); // TUPLE REDUCE
    if (v.parameter) {
      this.byte(0x89); // requires_grad False
      this.global("collections", "OrderedDict");
      this.byte(0x29, 0x52);
      this.byte(0x87, 0x52); // TUPLE3 REDUCE
    }
  }
  bytes(v: PyValue): Uint8Array {
    this.#out.length = 0;
    this.byte(0x80, 2); // PROTO 2
    this.value(v);
    this.byte(0x2e); // STOP
    return Uint8Array.from(this.#out);
  }
}

function contiguousStride(shape: number[]): number[] {
  const s = new Array<number>(shape.length);
  let acc = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

/** The protocol-2 pickle `torch.save` writes for `value` (zip format's data.pkl), and its storages' bytes by key. */
export function pickleBytes(
  value: PyValue,
): { pickle: Uint8Array; storages: Map<string, Uint8Array> } {
  const w = new PickleWriter(false);
  const pickle = w.bytes(value);
  return { pickle, storages: new Map(w.storages.map((s) => [s.key, s.bytes()])) };
}

/** How {@link torchFileBytes} writes. */
export interface TorchWriteOptions {
  /** The legacy (non-zip) format `torch.save(..., _use_new_zipfile_serialization=False)` writes. */
  legacy?: boolean;
  /** The zip's top folder (torch uses the file stem; `archive` since 2.x). */
  dir?: string;
  /** Extra zip members (name → bytes), for the member-name tests. */
  extraMembers?: [string, Uint8Array][];
  /** Deflate this member instead of storing it (torch never does; the reader refuses it). */
  compress?: string;
  /** Members newer torch versions add (`byteorder`, `.format_version`, `.storage_alignment`, `.data/*`). */
  torch2Members?: boolean;
  /** Write zip64 records (as past 4 GiB) even for a small file. */
  zip64?: boolean;
}

/** Where written bytes go: a file or a list of chunks. */
type Sink = (chunk: Uint8Array) => Promise<void>;

/**
 * Writes a PyTorch file holding `value` to `sink`, one storage at a time
 * (`torch.save`'s zip format, or the legacy one).
 */
async function writeTorch(sink: Sink, value: PyValue, opts: TorchWriteOptions): Promise<void> {
  const w = new PickleWriter(opts.legacy === true);
  const pkl = w.bytes(value);
  if (opts.legacy) {
    const magic = new PickleWriter(false);
    await sink(magic.bytes({ int: 0x1950a86a20f9469cfc6cn }));
    await sink(magic.bytes(1001));
    await sink(magic.bytes({
      dict: [["protocol_version", 1001], ["little_endian", true], [
        "type_sizes",
        { dict: [["short", 2], ["int", 4], ["long", 4]] },
      ]],
    }));
    await sink(pkl);
    await sink(magic.bytes(w.storages.map((s) => s.key)));
    for (const s of w.storages) {
      const n = new Uint8Array(8);
      new DataView(n.buffer).setBigInt64(0, BigInt(s.numel), true);
      await sink(n);
      await sink(s.bytes());
    }
    return;
  }
  const enc = new TextEncoder();
  const dir = opts.dir ?? "archive";
  const zip = new ZipWriter(sink, opts.zip64 === true);
  const add = (name: string, data: Uint8Array) => zip.add(name, data, name === opts.compress);
  await add(`${dir}/data.pkl`, pkl);
  if (opts.torch2Members) await add(`${dir}/byteorder`, enc.encode("little"));
  for (const s of w.storages) await add(`${dir}/data/${s.key}`, s.bytes());
  await add(`${dir}/version`, enc.encode("3\n"));
  if (opts.torch2Members) {
    await add(`${dir}/.format_version`, enc.encode("1"));
    await add(`${dir}/.storage_alignment`, enc.encode("64"));
    await add(`${dir}/.data/version`, enc.encode("3\n"));
    await add(`${dir}/.data/serialization_id`, enc.encode("1234567890"));
  }
  for (const [name, data] of opts.extraMembers ?? []) await add(name, data);
  await zip.finish();
}

/** The bytes of a PyTorch file holding `value` (`torch.save`'s zip format, or the legacy one). */
export async function torchFileBytes(
  value: PyValue,
  opts: TorchWriteOptions = {},
): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  await writeTorch((c) => Promise.resolve(void chunks.push(c)), value, opts);
  return concat(chunks);
}

/**
 * Writes a PyTorch file holding `value` to `path`, one storage at a time (a
 * lazy full-size model never sits in memory; past 4 GiB the zip gets zip64
 * records as PyTorch's writer gives it).
 */
export async function writeTorchFile(
  path: string,
  value: PyValue,
  opts: TorchWriteOptions = {},
): Promise<void> {
  const file = await open(path, "w");
  try {
    await writeTorch((c) => writeAll(file, c), value, opts);
  } finally {
    await file.close();
  }
}

/** Writes {@link originalLayout} as a PyTorch `.ckpt` (`{"state_dict": …, "global_step": …}` like LDM's checkpoints). */
export async function writeOriginalCkpt(
  path: string,
  model: TestSd15,
  opts: OriginalLayoutOptions & TorchWriteOptions = {},
): Promise<void> {
  const tensors = originalLayout(model, { ...opts, stateDictWrapper: false });
  const sd = stateDict(tensors);
  const value: PyValue = opts.stateDictWrapper
    ? {
      dict: [["epoch", 6], ["global_step", 840000], ["pytorch-lightning_version", "1.4.2"], [
        "state_dict",
        sd,
      ], [
        "optimizer_states",
        [],
      ]],
    }
    : sd;
  await writeTorchFile(path, value, opts);
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

/** CRC-32 (zip's, ISO-HDLC). */
export function crc32(b: Uint8Array): number {
  let c = 0xffffffff;
  for (let i = 0; i < b.length; i++) c = CRC_TABLE[(c ^ b[i]) & 255] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

async function deflateRaw(b: Uint8Array): Promise<Uint8Array> {
  const stream = new Blob([b as BlobPart]).stream().pipeThrough(
    new CompressionStream("deflate-raw"),
  );
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/**
 * Writes a zip archive member by member: stored members (one deflated when
 * asked), data aligned to 64 bytes as PyTorch's writer aligns it. zip64
 * records are written for offsets past 4 GiB, or for everything when forced.
 */
class ZipWriter {
  #offset = 0;
  readonly #central: Uint8Array[] = [];
  #count = 0;

  constructor(readonly sink: Sink, readonly forceZip64: boolean) {}

  async add(name: string, data: Uint8Array, deflate = false): Promise<void> {
    const nameBytes = new TextEncoder().encode(name);
    const body = deflate ? await deflateRaw(data) : data;
    if (body.length >= 0xffffffff) throw new RangeError(`${name}: a member of 4 GiB or more`);
    const crc = crc32(data);
    const offset = this.#offset;
    const base = offset + 30 + nameBytes.length;
    const pad = (64 - ((base + 4) % 64)) % 64;
    const extra = new Uint8Array(4 + pad);
    new DataView(extra.buffer).setUint16(0, 0x4b50, true);
    new DataView(extra.buffer).setUint16(2, pad, true);
    const local = new Uint8Array(30);
    const lv = new DataView(local.buffer);
    lv.setUint32(0, 0x04034b50, true);
    lv.setUint16(4, 45, true);
    lv.setUint16(8, deflate ? 8 : 0, true);
    lv.setUint32(14, crc, true);
    lv.setUint32(18, body.length, true);
    lv.setUint32(22, data.length, true);
    lv.setUint16(26, nameBytes.length, true);
    lv.setUint16(28, extra.length, true);
    for (const c of [local, nameBytes, extra, body]) await this.sink(c);
    this.#offset += local.length + nameBytes.length + extra.length + body.length;
    // Central directory entry; zip64 extended information holds the fields marked 0xffffffff,
    // in the order uncompressed size, compressed size, local header offset.
    const sizes64 = this.forceZip64;
    const offset64 = this.forceZip64 || offset >= 0xffffffff;
    const cd = new Uint8Array(46);
    const cv = new DataView(cd.buffer);
    cv.setUint32(0, 0x02014b50, true);
    cv.setUint16(4, 45, true);
    cv.setUint16(6, 45, true);
    cv.setUint16(10, deflate ? 8 : 0, true);
    cv.setUint32(16, crc, true);
    cv.setUint32(20, sizes64 ? 0xffffffff : body.length, true);
    cv.setUint32(24, sizes64 ? 0xffffffff : data.length, true);
    cv.setUint16(28, nameBytes.length, true);
    cv.setUint32(42, offset64 ? 0xffffffff : offset, true);
    const fields: number[] = [
      ...(sizes64 ? [data.length, body.length] : []),
      ...(offset64 ? [offset] : []),
    ];
    const cdExtra = new Uint8Array(fields.length ? 4 + 8 * fields.length : 0);
    if (fields.length) {
      const xv = new DataView(cdExtra.buffer);
      xv.setUint16(0, 0x0001, true);
      xv.setUint16(2, 8 * fields.length, true);
      fields.forEach((f, i) => xv.setBigUint64(4 + 8 * i, BigInt(f), true));
      cv.setUint16(30, cdExtra.length, true);
    }
    this.#central.push(cd, nameBytes, cdExtra);
    this.#count++;
  }

  async finish(): Promise<void> {
    const cdBytes = concat(this.#central);
    const cdOffset = this.#offset;
    const zip64 = this.forceZip64 || cdOffset >= 0xffffffff || this.#count >= 0xffff;
    await this.sink(cdBytes);
    if (zip64) {
      const rec = new Uint8Array(56);
      const rv = new DataView(rec.buffer);
      rv.setUint32(0, 0x06064b50, true);
      rv.setBigUint64(4, 44n, true);
      rv.setUint16(12, 45, true);
      rv.setUint16(14, 45, true);
      rv.setBigUint64(24, BigInt(this.#count), true);
      rv.setBigUint64(32, BigInt(this.#count), true);
      rv.setBigUint64(40, BigInt(cdBytes.length), true);
      rv.setBigUint64(48, BigInt(cdOffset), true);
      const loc = new Uint8Array(20);
      const locView = new DataView(loc.buffer);
      locView.setUint32(0, 0x07064b50, true);
      locView.setBigUint64(8, BigInt(cdOffset + cdBytes.length), true);
      locView.setUint32(16, 1, true);
      await this.sink(rec);
      await this.sink(loc);
    }
    const eocd = new Uint8Array(22);
    const ev = new DataView(eocd.buffer);
    ev.setUint32(0, 0x06054b50, true);
    ev.setUint16(8, zip64 ? 0xffff : this.#count, true);
    ev.setUint16(10, zip64 ? 0xffff : this.#count, true);
    ev.setUint32(12, zip64 ? 0xffffffff : cdBytes.length, true);
    ev.setUint32(16, zip64 ? 0xffffffff : cdOffset, true);
    await this.sink(eocd);
  }
}

/** A zip archive of stored members (and one deflated when asked); zip64 records when forced. */
export async function zipBytes(
  members: [string, Uint8Array][],
  compress?: string,
  zip64 = false,
): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  const zip = new ZipWriter((c) => Promise.resolve(void chunks.push(c)), zip64);
  for (const [name, data] of members) await zip.add(name, data, name === compress);
  await zip.finish();
  return concat(chunks);
}
