/**
 * Reads what a `.onnx` file declares without loading it: the graph's inputs
 * and outputs (name, element type, shape — the same {@link IoMeta} ONNX
 * Runtime's `inputMetadata` gives) and the external-data files its
 * initializers point to. The protobuf is walked field by field from disk and
 * weights are skipped by seeking, so a 500 MB model with inline weights costs
 * a few reads, not its size in memory. Used by `deno task models add` to
 * check an export against {@link CONTRACTS} before anything is written, with
 * no native code (the `models` task has no FFI permission).
 *
 * Field numbers: onnx/onnx.proto3 (ModelProto.graph = 7, GraphProto.initializer
 * = 5, input = 11, output = 12, TensorProto.name = 8, external_data = 13,
 * data_location = 14, ValueInfoProto.type = 2, TypeProto.tensor_type = 1,
 * Tensor.elem_type = 1, shape = 2, Dimension.dim_value = 1, dim_param = 2).
 *
 * @module
 */

import type { IoMeta } from "./session_options.ts";

/** One external-data file a model reads. */
export interface ExternalDataRef {
  /** The `location` recorded in the model, relative to the model's folder. */
  location: string;
  /** The byte just past the last one any initializer reads from it. */
  end: number;
  /** How many initializers live in it. */
  tensors: number;
}

/**
 * One weight buffer a CPU kernel pre-packed, as ONNX Runtime writes it into
 * the external data of an optimised graph saved with
 * `session.save_external_prepacked_constant_initializers`: an entry
 * `prepacked_<n>` of the initializer's `external_data` whose value is
 * `<kernel key>|<offset>;<length>;<checksum>[|…]` (onnxruntime
 * `onnxruntime/core/framework/tensor_external_data_info.cc`,
 * `AddPrepackedEntriesToProto` and `ExternalDataInfo::Create`).
 */
export interface PrepackedBlob {
  /** The initializer it was packed from. */
  tensor: string;
  /** The kernel's key, e.g. `MatMul+1175…`. */
  key: string;
  /** The file it is in (the initializer's `location`). */
  location: string;
  /** Its first byte in that file. */
  offset: number;
  /** Its size in bytes. */
  length: number;
}

/** What {@link readModelInfo} found. */
export interface ModelInfo {
  /** Graph inputs that are not initializers (what ONNX Runtime lists as inputs), in order. */
  inputs: IoMeta[];
  /** Graph outputs, in order. */
  outputs: IoMeta[];
  /** External-data files, in the order first referenced. */
  externalData: ExternalDataRef[];
  /** Pre-packed weight buffers (only in a graph ONNX Runtime saved with them), in file order. */
  prepacked: PrepackedBlob[];
}

/** A model file that is not a readable ONNX protobuf (truncated, or not ONNX at all). */
export class ModelFormatError extends Error {
  /** Creates the error with a complete message. */
  constructor(message: string) {
    super(message);
    this.name = "ModelFormatError";
  }
}

/** ONNX TensorProto.DataType → ONNX Runtime's element type names (onnxruntime-common `Tensor.Type`). */
const ELEM_TYPES: Record<number, string> = {
  1: "float32",
  2: "uint8",
  3: "int8",
  4: "uint16",
  5: "int16",
  6: "int32",
  7: "int64",
  8: "string",
  9: "bool",
  10: "float16",
  11: "float64",
  12: "uint32",
  13: "uint64",
  14: "complex64",
  15: "complex128",
  16: "bfloat16",
  17: "float8e4m3fn",
  18: "float8e4m3fnuz",
  19: "float8e5m2",
  20: "float8e5m2fnuz",
  21: "uint4",
  22: "int4",
};

/** Bytes per element of the fixed-size ONNX types (for external tensors without a `length`). */
export const ELEM_BYTES: Readonly<Record<number, number>> = {
  1: 4,
  2: 1,
  3: 1,
  4: 2,
  5: 2,
  6: 4,
  7: 8,
  9: 1,
  10: 2,
  11: 8,
  12: 4,
  13: 8,
  14: 8,
  15: 16,
  16: 2,
};

const WIRE_VARINT = 0;
const WIRE_I64 = 1;
const WIRE_LEN = 2;
const WIRE_I32 = 5;

/** Reads a protobuf from a file with a moving window; skipping is a seek. */
class FileReader {
  readonly #file: Deno.FsFile;
  readonly size: number;
  readonly #name: string;
  #buf = new Uint8Array(1 << 16);
  #start = 0;
  #len = 0;
  pos = 0;

  constructor(file: Deno.FsFile, size: number, name: string) {
    this.#file = file;
    this.size = size;
    this.#name = name;
  }

  truncated(what: string, need: number): never {
    throw new ModelFormatError(
      `${this.#name}: truncated or not an ONNX model: ${what} at byte ${this.pos} needs ` +
        `${need} bytes, but the file has ${this.size.toLocaleString("en-US")} bytes`,
    );
  }

  /** Makes bytes [pos, pos + n) (or up to the end of file) available in the window. */
  async #ensure(n: number): Promise<void> {
    const want = Math.min(n, this.size - this.pos);
    if (this.pos >= this.#start && this.pos + want <= this.#start + this.#len) return;
    if (want > this.#buf.length) this.#buf = new Uint8Array(want);
    await this.#file.seek(this.pos, Deno.SeekMode.Start);
    let got = 0;
    const limit = Math.min(this.#buf.length, this.size - this.pos);
    while (got < limit) {
      const r = await this.#file.read(this.#buf.subarray(got, limit));
      if (r === null) break;
      got += r;
    }
    this.#start = this.pos;
    this.#len = got;
  }

  async varint(): Promise<number> {
    await this.#ensure(10);
    let result = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      const at = this.pos - this.#start;
      if (at >= this.#len) this.truncated("a varint", 1);
      const b = this.#buf[at];
      this.pos++;
      result += (b & 0x7f) * scale;
      scale *= 128;
      if ((b & 0x80) === 0) return result;
    }
    throw new ModelFormatError(`${this.#name}: malformed varint at byte ${this.pos}`);
  }

  async bytes(n: number): Promise<Uint8Array> {
    if (this.pos + n > this.size) this.truncated("a field", n);
    await this.#ensure(n);
    const at = this.pos - this.#start;
    this.pos += n;
    return this.#buf.slice(at, at + n);
  }

  skip(n: number): void {
    if (this.pos + n > this.size) this.truncated("a field", n);
    this.pos += n;
  }

  /** Skips a field's value of wire type `wt`. */
  async skipValue(wt: number): Promise<void> {
    if (wt === WIRE_VARINT) await this.varint();
    else if (wt === WIRE_I64) this.skip(8);
    else if (wt === WIRE_I32) this.skip(4);
    else if (wt === WIRE_LEN) this.skip(await this.varint());
    else {throw new ModelFormatError(
        `${this.#name}: unsupported wire type ${wt} at byte ${this.pos}`,
      );}
  }

  /** Length of a length-delimited field, checked against the file. */
  async length(what: string): Promise<number> {
    const n = await this.varint();
    if (this.pos + n > this.size) this.truncated(what, n);
    return n;
  }
}

/** A protobuf message held in memory (small ones: ValueInfoProto and its parts). */
class Buf {
  pos = 0;
  constructor(readonly bytes: Uint8Array, readonly end = bytes.length) {}

  varint(): number {
    let result = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new ModelFormatError("truncated varint");
      const b = this.bytes[this.pos++];
      result += (b & 0x7f) * scale;
      scale *= 128;
      if ((b & 0x80) === 0) return result;
    }
    throw new ModelFormatError("malformed varint");
  }

  /** A sub-message or string: [start, end) of the next length-delimited field. */
  sub(): Buf {
    const n = this.varint();
    if (this.pos + n > this.end) throw new ModelFormatError("truncated field");
    const b = new Buf(this.bytes, this.pos + n);
    b.pos = this.pos;
    this.pos += n;
    return b;
  }

  string(): string {
    const s = this.sub();
    return new TextDecoder().decode(this.bytes.subarray(s.pos, s.end));
  }

  skip(wt: number): void {
    if (wt === WIRE_VARINT) this.varint();
    else if (wt === WIRE_I64) this.pos += 8;
    else if (wt === WIRE_I32) this.pos += 4;
    else if (wt === WIRE_LEN) this.sub();
    else throw new ModelFormatError(`unsupported wire type ${wt}`);
    if (this.pos > this.end) throw new ModelFormatError("truncated field");
  }

  *fields(): Generator<[number, number]> {
    while (this.pos < this.end) {
      const tag = this.varint();
      yield [Math.floor(tag / 8), tag & 7];
    }
  }
}

/** int64 varints of negative dims arrive as 2^64 − n; a dim of −1 means unknown. */
function dimValue(v: number): number {
  return v >= 2 ** 63 ? -1 : v;
}

/** Parses a ValueInfoProto into ORT's view of it (dtype "non-tensor" for sequences and maps). */
function valueInfo(b: Buf): IoMeta {
  let name = "";
  let dtype = "non-tensor";
  const shape: (number | string)[] = [];
  for (const [field, wt] of b.fields()) {
    if (field === 1 && wt === WIRE_LEN) name = b.string();
    else if (field === 2 && wt === WIRE_LEN) {
      const type = b.sub();
      for (const [tf, twt] of type.fields()) {
        if (tf !== 1 || twt !== WIRE_LEN) {
          type.skip(twt);
          continue;
        }
        const tensor = type.sub();
        for (const [f, w] of tensor.fields()) {
          if (f === 1 && w === WIRE_VARINT) {
            const t = tensor.varint();
            dtype = ELEM_TYPES[t] ?? `elem_type ${t}`;
          } else if (f === 2 && w === WIRE_LEN) {
            const shapeProto = tensor.sub();
            for (const [sf, swt] of shapeProto.fields()) {
              if (sf !== 1 || swt !== WIRE_LEN) {
                shapeProto.skip(swt);
                continue;
              }
              const dim = shapeProto.sub();
              let value: number | string = "";
              for (const [df, dwt] of dim.fields()) {
                if (df === 1 && dwt === WIRE_VARINT) {
                  const v = dimValue(dim.varint());
                  value = v < 0 ? "" : v;
                } else if (df === 2 && dwt === WIRE_LEN) value = dim.string();
                else dim.skip(dwt);
              }
              shape.push(value);
            }
          } else tensor.skip(w);
        }
      }
    } else b.skip(wt);
  }
  return { name, dtype, shape };
}

/** Reads one TensorProto's name and external-data record, skipping its data. */
async function tensorHeader(
  r: FileReader,
  end: number,
): Promise<
  { name: string; location?: string; offset: number; length?: number; prepacked: string[] }
> {
  let name = "";
  let external = false;
  let elemType = 0;
  const dims: number[] = [];
  const kv: Record<string, string> = {};
  const prepacked: string[] = [];
  while (r.pos < end) {
    const tag = await r.varint();
    const field = Math.floor(tag / 8);
    const wt = tag & 7;
    if (field === 8 && wt === WIRE_LEN) {
      name = new TextDecoder().decode(await r.bytes(await r.length("a tensor name")));
    } else if (field === 13 && wt === WIRE_LEN) {
      const b = new Buf(await r.bytes(await r.length("an external_data entry")));
      let key = "";
      let value = "";
      for (const [f, w] of b.fields()) {
        if (f === 1 && w === WIRE_LEN) key = b.string();
        else if (f === 2 && w === WIRE_LEN) value = b.string();
        else b.skip(w);
      }
      if (key.startsWith("prepacked")) prepacked.push(value);
      else kv[key] = value;
    } else if (field === 14 && wt === WIRE_VARINT) {
      external = (await r.varint()) === 1;
    } else if (field === 1 && wt === WIRE_VARINT) {
      dims.push(await r.varint());
    } else if (field === 1 && wt === WIRE_LEN) {
      const b = new Buf(await r.bytes(await r.length("tensor dims")));
      while (b.pos < b.end) dims.push(b.varint());
    } else if (field === 2 && wt === WIRE_VARINT) {
      elemType = await r.varint();
    } else await r.skipValue(wt);
  }
  if (!external || kv.location === undefined) return { name, offset: 0, prepacked: [] };
  const offset = Number(kv.offset ?? "0");
  // Without a recorded length ORT reads the tensor's own byte size.
  const length = kv.length !== undefined
    ? Number(kv.length)
    : ELEM_BYTES[elemType] !== undefined
    ? dims.reduce((n, d) => n * d, 1) * ELEM_BYTES[elemType]
    : undefined;
  return { name, location: kv.location, offset, length, prepacked };
}

/** The blobs of `prepacked_<n>` values (`key|offset;length;checksum|…`); malformed parts are skipped, as ONNX Runtime skips them. */
function prepackedBlobs(tensor: string, location: string, values: string[]): PrepackedBlob[] {
  const out: PrepackedBlob[] = [];
  for (const value of values) {
    const [key, ...blobs] = value.split("|");
    for (const blob of blobs) {
      const fields = blob.split(";");
      const [offset, length] = fields.map(Number);
      if (fields.length === 3 && Number.isSafeInteger(offset) && Number.isSafeInteger(length)) {
        out.push({ tensor, key, location, offset, length });
      }
    }
  }
  return out;
}

/**
 * Reads the declared I/O and external-data references of an ONNX model file.
 *
 * @throws ModelFormatError when the file is truncated or is not an ONNX protobuf
 * @throws Deno.errors.NotFound when it does not exist
 */
export async function readModelInfo(path: string): Promise<ModelInfo> {
  using file = await Deno.open(path, { read: true });
  const size = (await file.stat()).size;
  const name = path.split(/[\\/]/).slice(-2).join("/");
  const r = new FileReader(file, size, name);
  const inputs: IoMeta[] = [];
  const outputs: IoMeta[] = [];
  const initializers = new Set<string>();
  const external = new Map<string, ExternalDataRef>();
  const prepacked: PrepackedBlob[] = [];
  let sawGraph = false;
  while (r.pos < size) {
    const tag = await r.varint();
    const field = Math.floor(tag / 8);
    const wt = tag & 7;
    if (field === 0) {
      throw new ModelFormatError(`${name}: not an ONNX model (field 0 at byte ${r.pos})`);
    }
    if (field !== 7 || wt !== WIRE_LEN) {
      await r.skipValue(wt);
      continue;
    }
    sawGraph = true;
    const graphLength = await r.length("the graph");
    const graphEnd = r.pos + graphLength;
    while (r.pos < graphEnd) {
      const gtag = await r.varint();
      const gf = Math.floor(gtag / 8);
      const gwt = gtag & 7;
      if ((gf === 11 || gf === 12) && gwt === WIRE_LEN) {
        const meta = valueInfo(new Buf(await r.bytes(await r.length("a graph input/output"))));
        (gf === 11 ? inputs : outputs).push(meta);
      } else if (gf === 5 && gwt === WIRE_LEN) {
        const tensorLength = await r.length("an initializer");
        const end = r.pos + tensorLength;
        const t = await tensorHeader(r, end);
        r.pos = end;
        initializers.add(t.name);
        if (t.location !== undefined) {
          const ref = external.get(t.location) ?? { location: t.location, end: 0, tensors: 0 };
          ref.end = Math.max(ref.end, t.offset + (t.length ?? 0));
          ref.tensors++;
          external.set(t.location, ref);
          prepacked.push(...prepackedBlobs(t.name, t.location, t.prepacked));
        }
      } else await r.skipValue(gwt);
    }
  }
  if (!sawGraph) throw new ModelFormatError(`${name}: not an ONNX model (no graph)`);
  // Before IR version 4 initializers were also listed as inputs; ORT does not report those.
  return {
    inputs: inputs.filter((m) => !initializers.has(m.name)),
    outputs,
    externalData: [...external.values()],
    prepacked: prepacked.sort((a, b) => a.offset - b.offset),
  };
}
