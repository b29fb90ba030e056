/**
 * A minimal ONNX graph builder on the `onnx-proto` protobuf messages
 * (onnx v1.10 schema, messages under `onnx.onnx.*`): typed inputs/outputs with
 * symbolic dims, initializers (optionally moved to an external-data file the
 * way `onnx.save_model(..., save_as_external_data=True, location=...)` lays it
 * out), and nodes. Output is deterministic: same calls, same bytes.
 *
 * @module
 */

import { createHash } from "node:crypto";
import onnx from "onnx-proto";
import { float32ToFloat16Bits } from "../onnx/fp16.ts";
import { concatBytes } from "../bytes/mod.ts";

const P = onnx.onnx;

/** Element types the builder writes. */
export type ElemType = "float32" | "float16" | "float64" | "int8" | "int32" | "int64" | "bool";

/** A dimension: a fixed size or a symbolic (dynamic) name. */
export type Dim = number | string;

/** A node attribute, tagged with its ONNX attribute type. */
export type Attr =
  | { i: number }
  | { f: number }
  | { ints: readonly number[] }
  | { floats: readonly number[] }
  | { s: string };

/** Element count of a shape. */
export function numel(dims: readonly number[]): number {
  return dims.reduce((a, b) => a * b, 1);
}

/** Typed data of an initializer. */
export type InitData =
  | Float32Array
  | Float64Array
  | Int8Array
  | Int32Array
  | BigInt64Array
  | Uint16Array;

/** ONNX TensorProto.DataType codes (onnx/onnx.proto). */
const DATA_TYPE: Record<ElemType, number> = {
  float32: 1,
  int8: 3,
  int32: 6,
  int64: 7,
  bool: 9,
  float16: 10,
  float64: 11,
};

/** ONNX AttributeProto.AttributeType codes (onnx/onnx.proto). */
const ATTR_TYPE = { FLOAT: 1, INT: 2, STRING: 3, FLOATS: 6, INTS: 7 } as const;

/** Where initializers go when a model is encoded. */
export interface ExternalDataOptions {
  /** File name recorded in the model, next to it: "weights.pb" or "model.onnx_data". */
  location: string;
  /** Initializers with at least this many bytes go to the external file. */
  minBytes: number;
}

/** Options of {@link Graph.encode}. */
export interface EncodeOptions {
  /** Default-domain opset version. */
  opset: number;
  /** Moves large initializers into one external file. */
  externalData?: ExternalDataOptions;
  /** Free-text description stored in the model. */
  docString?: string;
}

/** An encoded model and, when requested, its external-data file. */
export interface EncodedModel {
  /** The `.onnx` protobuf bytes. */
  model: Uint8Array;
  /** The external data bytes, when any initializer was moved out. */
  external?: { location: string; data: Uint8Array };
}

interface Initializer {
  name: string;
  type: ElemType;
  dims: number[];
  /** The values, or a function that makes them when the model is written (large models). */
  data: InitData | (() => InitData) | (() => Promise<InitData>);
}

/** Options of {@link Graph.writeFiles}. */
export interface WriteOptions extends EncodeOptions {
  /** Where every initializer of at least `minBytes` goes (required: large models). */
  externalData: ExternalDataOptions;
  /**
   * Writes a float16 model: float32 initializers (except Resize scales), inputs,
   * outputs and Cast targets become float16, as an fp16 export stores them.
   */
  float16?: boolean;
}

/** Options of {@link Graph.writeModel}. */
export interface StreamWriteOptions extends EncodeOptions {
  /** Where every initializer of at least `minBytes` goes; absent: every initializer inline. */
  externalData?: ExternalDataOptions;
  /** Writes a float16 model, as {@link WriteOptions.float16}. */
  float16?: boolean;
  /** Checked between tensors: an abort stops the writing with its reason. */
  signal?: AbortSignal;
  /** Called after each initializer is written: how many of how many. */
  onTensor?: (done: number, total: number) => void;
}

/** A file {@link Graph.writeModel} wrote. */
export interface StreamedFile {
  /** File name (no folder). */
  name: string;
  /** Bytes written. */
  size: number;
  /** sha256 of the bytes written (64 lowercase hex). */
  sha256: string;
}

/** Bytes per element of each written type. */
const ELEM_BYTES: Record<ElemType, number> = {
  float32: 4,
  int8: 1,
  int32: 4,
  int64: 8,
  bool: 1,
  float16: 2,
  float64: 8,
};

interface PlannedTensor {
  init: Initializer;
  /** Written type (float16 for the float32 weights of an fp16 model). */
  type: ElemType;
  byteLength: number;
  external: boolean;
}

interface WritePlan {
  tensors: PlannedTensor[];
  nodes: onnx.onnx.INodeProto[];
  inputs: onnx.onnx.IValueInfoProto[];
  outputs: onnx.onnx.IValueInfoProto[];
}

/** One ONNX graph under construction. */
export class Graph {
  readonly #name: string;
  readonly #inputs: onnx.onnx.IValueInfoProto[] = [];
  readonly #outputs: onnx.onnx.IValueInfoProto[] = [];
  readonly #nodes: onnx.onnx.INodeProto[] = [];
  readonly #inits: Initializer[] = [];
  readonly #used = new Set<string>();
  readonly #constCache = new Map<string, string>();
  readonly #keepF32 = new Set<string>();
  #counter = 0;

  /** Starts an empty graph called `name`. */
  constructor(name: string) {
    this.#name = name;
  }

  /** A fresh value name derived from `hint`. */
  fresh(hint: string): string {
    let name = hint;
    while (this.#used.has(name)) name = `${hint}_${++this.#counter}`;
    this.#used.add(name);
    return name;
  }

  /**
   * Keeps `value` float32 when the model is written in float16: an
   * initializer stays float32, a Cast to float32 producing it stays one. For
   * parts an fp16 export computes in float32 (the timestep embedding's
   * sinusoids); returns `value`.
   */
  keepFloat32(value: string): string {
    this.#keepF32.add(value);
    return value;
  }

  /** Inputs and outputs as `name: [dims]` (symbolic dims as their names), for checks. */
  signature(): { inputs: Record<string, Dim[]>; outputs: Record<string, Dim[]> } {
    const dims = (v: onnx.onnx.IValueInfoProto): Dim[] =>
      (v.type?.tensorType?.shape?.dim ?? []).map((d) => d.dimParam ?? Number(d.dimValue));
    return {
      inputs: Object.fromEntries(this.#inputs.map((v) => [v.name!, dims(v)])),
      outputs: Object.fromEntries(this.#outputs.map((v) => [v.name!, dims(v)])),
    };
  }

  /** The names of the nodes written so far, with their op types. */
  nodeNames(): Array<{ name: string; op: string }> {
    return this.#nodes.map((n) => ({ name: n.name ?? "", op: n.opType ?? "" }));
  }

  /** Declares a graph input; returns its name. */
  input(name: string, type: ElemType, shape: readonly Dim[]): string {
    if (this.#used.has(name)) throw new Error(`graph ${this.#name}: duplicate name ${name}`);
    this.#used.add(name);
    this.#inputs.push(valueInfo(name, type, shape));
    return name;
  }

  /** Declares a graph output `name` carrying `value` (an Identity is added when names differ). */
  output(value: string, name: string, type: ElemType, shape: readonly Dim[]): void {
    if (value !== name) {
      if (this.#used.has(name)) throw new Error(`graph ${this.#name}: duplicate name ${name}`);
      this.#used.add(name);
      this.#nodes.push({ opType: "Identity", input: [value], output: [name], name: `out_${name}` });
    }
    this.#outputs.push(valueInfo(name, type, shape));
  }

  /**
   * Adds an initializer; returns its name. `data` may be a function that
   * makes the values only when the model is written ({@link Graph.writeFiles}
   * then holds one tensor at a time); an async one (values read from a file)
   * needs {@link Graph.writeModel}.
   */
  init(
    hint: string,
    type: ElemType,
    dims: readonly number[],
    data: InitData | (() => InitData) | (() => Promise<InitData>),
  ): string {
    const size = dims.reduce((a, b) => a * b, 1);
    if (typeof data !== "function" && size !== data.length) {
      throw new Error(`initializer ${hint}: ${data.length} values for dims [${dims}]`);
    }
    const name = this.fresh(hint);
    this.#inits.push({ name, type, dims: [...dims], data });
    return name;
  }

  /** A float32 constant (shared between uses when small). */
  constF(values: readonly number[], dims: readonly number[] = [values.length]): string {
    return this.#cached(
      `f:${dims}:${values}`,
      () => this.init("cf", "float32", dims, Float32Array.from(values)),
    );
  }

  /** An int64 constant (shared between uses). */
  constI64(values: readonly number[], dims: readonly number[] = [values.length]): string {
    return this.#cached(
      `i:${dims}:${values}`,
      () => this.init("ci", "int64", dims, BigInt64Array.from(values.map((v) => BigInt(v)))),
    );
  }

  /**
   * Adds a node with one output; returns the output name. `nodeName` sets the
   * node's name (default `n<index>_<type>`), e.g. a torch-export scope such as
   * `/down_blocks.0/resnets.0/conv1/Conv`, which LoRA key mapping relies on.
   */
  op(
    type: string,
    inputs: readonly string[],
    attrs: Record<string, Attr> = {},
    hint?: string,
    nodeName?: string,
  ): string {
    return this.opN(type, inputs, 1, attrs, hint, nodeName)[0];
  }

  /** Adds a node with `n` outputs; returns their names. `nodeName` as in {@link Graph.op}. */
  opN(
    type: string,
    inputs: readonly string[],
    n: number,
    attrs: Record<string, Attr> = {},
    hint?: string,
    nodeName?: string,
  ): string[] {
    const base = hint ?? type.toLowerCase();
    const outputs = Array.from(
      { length: n },
      (_, i) => this.fresh(n === 1 ? base : `${base}_${i}`),
    );
    this.#nodes.push({
      opType: type,
      input: [...inputs],
      output: outputs,
      name: nodeName ?? `n${this.#nodes.length}_${type}`,
      attribute: Object.entries(attrs).map(([name, a]) => attribute(name, a)),
    });
    return outputs;
  }

  /** Serializes the model. */
  encode(options: EncodeOptions): EncodedModel {
    const chunks: Uint8Array[] = [];
    let offset = 0;
    const initializer = this.#inits.map((t) => {
      const data = materialize(t);
      const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
      const ext = options.externalData;
      if (ext && bytes.byteLength >= ext.minBytes) {
        chunks.push(bytes);
        const entry = externalTensor(t, t.type, ext.location, offset, bytes.byteLength);
        offset += bytes.byteLength;
        return entry;
      }
      return inlineTensor(t, t.type, bytes);
    });
    const out: EncodedModel = {
      model: this.#modelBytes(this.#nodes, initializer, this.#inputs, this.#outputs, options),
    };
    if (options.externalData && chunks.length > 0) {
      const data = new Uint8Array(offset);
      let at = 0;
      for (const c of chunks) {
        data.set(c, at);
        at += c.byteLength;
      }
      out.external = { location: options.externalData.location, data };
    }
    return out;
  }

  /**
   * Writes the model to `modelPath` and its external data next to it, one
   * initializer at a time (lazy initializers are made, written and dropped),
   * so models far beyond 2 GB of weights can be written with little memory.
   * Returns the bytes written to the external file and the element count of
   * every initializer.
   */
  writeFiles(modelPath: string, options: WriteOptions): { externalBytes: number } {
    const dir = modelPath.slice(0, Math.max(0, modelPath.lastIndexOf("/") + 1));
    const ext = options.externalData;
    const plan = this.#plan(options);
    const file = Deno.openSync(`${dir}${ext.location}`, {
      write: true,
      create: true,
      truncate: true,
    });
    let offset = 0;
    const initializer: onnx.onnx.ITensorProto[] = [];
    try {
      for (const p of plan.tensors) {
        const bytes = tensorBytes(p, syncData(p.init));
        if (p.external) {
          let at = 0;
          while (at < bytes.byteLength) at += file.writeSync(bytes.subarray(at));
          initializer.push(externalTensor(p.init, p.type, ext.location, offset, bytes.byteLength));
          offset += bytes.byteLength;
        } else {
          initializer.push(inlineTensor(p.init, p.type, bytes));
        }
      }
    } finally {
      file.close();
    }
    Deno.writeFileSync(
      modelPath,
      this.#modelBytes(plan.nodes, initializer, plan.inputs, plan.outputs, options),
    );
    return { externalBytes: offset };
  }

  /**
   * Writes the model to `modelPath` (and, with `externalData`, the large
   * initializers to that file next to it) streaming one initializer at a
   * time: each is made or read (async initializers allowed), converted,
   * written and dropped, whether it goes to the external file or inline into
   * the model file — the model's protobuf is laid out from the known tensor
   * sizes before any value is made, so even inline weights are never all in
   * memory. The bytes are those {@link Graph.writeFiles} and
   * {@link Graph.encode} write for the same graph and options. Checks
   * `signal` between tensors. Returns every file written with its size and
   * sha256 (hashed while writing), the model first.
   */
  async writeModel(modelPath: string, options: StreamWriteOptions): Promise<StreamedFile[]> {
    const dir = modelPath.slice(0, Math.max(0, modelPath.lastIndexOf("/") + 1));
    const ext = options.externalData;
    const plan = this.#plan(options);
    const { signal, onTensor } = options;
    // External layout: offsets from the sizes, in initializer order.
    let offset = 0;
    const records = plan.tensors.map((p) => {
      if (!p.external || !ext) return undefined;
      const proto = externalTensor(p.init, p.type, ext.location, offset, p.byteLength);
      offset += p.byteLength;
      return P.TensorProto.encode(proto).finish();
    });
    const inlineHeads = plan.tensors.map((p) =>
      p.external ? undefined : P.TensorProto.encode({
        name: p.init.name,
        dims: p.init.dims,
        dataType: DATA_TYPE[p.type],
      }).finish()
    );
    // GraphProto fields in the encoder's order: node (1), name (2), initializer (5), input (11), output (12).
    const head = P.GraphProto.encode({ name: this.#name, node: plan.nodes }).finish();
    const tail = P.GraphProto.encode({ input: plan.inputs, output: plan.outputs }).finish();
    const tensorLength = (i: number): number => {
      const rec = records[i];
      if (rec) return rec.byteLength;
      const n = plan.tensors[i].byteLength;
      return inlineHeads[i]!.byteLength + 1 + varintLength(n) + n;
    };
    let graphLength = head.byteLength + tail.byteLength;
    for (let i = 0; i < plan.tensors.length; i++) {
      const len = tensorLength(i);
      graphLength += 1 + varintLength(len) + len;
    }
    // ModelProto fields 1-6, then graph (7), then opset_import (8).
    const modelHead = P.ModelProto.encode(modelFields(options)).finish();
    const modelTail = P.ModelProto.encode({
      opsetImport: [{ domain: "", version: options.opset }],
    }).finish();
    const model = await HashedFile.create(modelPath);
    const external = ext && plan.tensors.some((p) => p.external)
      ? await HashedFile.create(`${dir}${ext.location}`)
      : undefined;
    try {
      await model.write(modelHead);
      await model.write(concatBytes([Uint8Array.of(58), varint(graphLength)]));
      await model.write(head);
      for (let i = 0; i < plan.tensors.length; i++) {
        signal?.throwIfAborted();
        const p = plan.tensors[i];
        const bytes = tensorBytes(p, await asyncData(p.init));
        const len = tensorLength(i);
        await model.write(concatBytes([Uint8Array.of(42), varint(len)]));
        if (p.external) {
          await external!.write(bytes);
          await model.write(records[i]!);
        } else {
          await model.write(
            concatBytes([inlineHeads[i]!, Uint8Array.of(74), varint(bytes.byteLength)]),
          );
          await model.write(bytes);
        }
        onTensor?.(i + 1, plan.tensors.length);
      }
      await model.write(tail);
      await model.write(modelTail);
    } finally {
      model.close();
      external?.close();
    }
    const files = [model.result()];
    if (external) files.push(external.result());
    return files;
  }

  /** What a writer writes: every initializer with its written type and place, and the retyped graph. */
  #plan(options: { externalData?: ExternalDataOptions; float16?: boolean }): WritePlan {
    const fp16 = options.float16 === true;
    const keepF32 = new Set([
      ...this.#keepF32,
      ...this.#nodes.filter((n) => n.opType === "Resize").map((n) => n.input![2]).filter(Boolean),
    ]);
    const minBytes = options.externalData?.minBytes ?? Infinity;
    const tensors = this.#inits.map((init): PlannedTensor => {
      const type = fp16 && init.type === "float32" && !keepF32.has(init.name)
        ? "float16"
        : init.type;
      const byteLength = numel(init.dims) * ELEM_BYTES[type];
      return { init, type, byteLength, external: byteLength >= minBytes };
    });
    const retype = (v: onnx.onnx.IValueInfoProto) =>
      fp16 && v.type?.tensorType?.elemType === DATA_TYPE.float32
        ? { ...v, type: { tensorType: { ...v.type.tensorType, elemType: DATA_TYPE.float16 } } }
        : v;
    const nodes = fp16
      ? this.#nodes.map((n) =>
        n.opType === "Cast" && n.attribute?.[0]?.i === DATA_TYPE.float32 &&
          !keepF32.has(n.output![0])
          ? { ...n, attribute: [{ ...n.attribute[0], i: DATA_TYPE.float16 }] }
          : n
      )
      : this.#nodes;
    return { tensors, nodes, inputs: this.#inputs.map(retype), outputs: this.#outputs.map(retype) };
  }

  /** The serialized ModelProto around this graph's name with these parts (IR 8, one opset). */
  #modelBytes(
    node: onnx.onnx.INodeProto[],
    initializer: onnx.onnx.ITensorProto[],
    input: onnx.onnx.IValueInfoProto[],
    output: onnx.onnx.IValueInfoProto[],
    options: EncodeOptions,
  ): Uint8Array {
    const model = P.ModelProto.create({
      ...modelFields(options),
      opsetImport: [{ domain: "", version: options.opset }],
      graph: { name: this.#name, node, initializer, input, output },
    });
    return P.ModelProto.encode(model).finish();
  }

  #cached(key: string, make: () => string): string {
    let name = this.#constCache.get(key);
    if (name === undefined) {
      name = make();
      this.#constCache.set(key, name);
    }
    return name;
  }
}

/**
 * An initializer whose bytes lie in the external file `location`, `length`
 * bytes from `offset` (the ONNX external-data keys, onnx.proto `TensorProto`).
 */
function externalTensor(
  t: Initializer,
  type: ElemType,
  location: string,
  offset: number,
  length: number,
): onnx.onnx.ITensorProto {
  return {
    name: t.name,
    dims: t.dims,
    dataType: DATA_TYPE[type],
    dataLocation: P.TensorProto.DataLocation.EXTERNAL,
    externalData: [
      { key: "location", value: location },
      { key: "offset", value: String(offset) },
      { key: "length", value: String(length) },
    ],
  };
}

/** An initializer with its bytes inline (`raw_data`; copied, so `bytes` may be reused). */
function inlineTensor(t: Initializer, type: ElemType, bytes: Uint8Array): onnx.onnx.ITensorProto {
  return { name: t.name, dims: t.dims, dataType: DATA_TYPE[type], rawData: bytes.slice() };
}

function materialize(t: Initializer): InitData {
  return checked(t, syncData(t));
}

/** The values of `t` now; an async initializer cannot be made here. */
function syncData(t: Initializer): InitData {
  const data = typeof t.data === "function" ? t.data() : t.data;
  if (data instanceof Promise) {
    throw new Error(`initializer ${t.name} is read asynchronously: write it with writeModel`);
  }
  return checked(t, data);
}

/** The values of `t`, made or read. */
async function asyncData(t: Initializer): Promise<InitData> {
  return checked(t, typeof t.data === "function" ? await t.data() : t.data);
}

function checked(t: Initializer, data: InitData): InitData {
  const size = numel(t.dims);
  if (data.length !== size) {
    throw new Error(`initializer ${t.name}: ${data.length} values for dims [${t.dims}]`);
  }
  return data;
}

/** The bytes written for a planned tensor (float32 narrowed to float16 where planned). */
function tensorBytes(p: PlannedTensor, data: InitData): Uint8Array {
  const out = p.type === "float16" && p.init.type === "float32"
    ? float32ToFloat16Bits(data as Float32Array)
    : data;
  return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
}

/** The ModelProto fields before the graph (ir_version … doc_string). */
function modelFields(options: EncodeOptions): onnx.onnx.IModelProto {
  return {
    irVersion: 8,
    producerName: "generate-image-sd15-mcp model_builder",
    producerVersion: "1",
    docString: options.docString ?? "",
  };
}

/** Bytes of a protobuf varint of `n` (n < 2^53). */
function varintLength(n: number): number {
  let len = 1;
  while (n >= 128) {
    n = Math.floor(n / 128);
    len++;
  }
  return len;
}

/** `n` as a protobuf varint. */
function varint(n: number): Uint8Array {
  const out: number[] = [];
  while (n >= 128) {
    out.push((n % 128) | 128);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return Uint8Array.from(out);
}

/** A file written front to back, hashed as it is written. */
class HashedFile {
  readonly #path: string;
  readonly #file: Deno.FsFile;
  readonly #hash = createHash("sha256");
  #size = 0;

  private constructor(path: string, file: Deno.FsFile) {
    this.#path = path;
    this.#file = file;
  }

  static async create(path: string): Promise<HashedFile> {
    const file = await Deno.open(path, { write: true, create: true, truncate: true });
    return new HashedFile(path, file);
  }

  async write(bytes: Uint8Array): Promise<void> {
    this.#hash.update(bytes);
    let at = 0;
    while (at < bytes.byteLength) at += await this.#file.write(bytes.subarray(at));
    this.#size += bytes.byteLength;
  }

  close(): void {
    try {
      this.#file.close();
    } catch {
      // already closed
    }
  }

  result(): StreamedFile {
    const name = this.#path.slice(this.#path.lastIndexOf("/") + 1);
    return { name, size: this.#size, sha256: this.#hash.digest("hex") };
  }
}

function valueInfo(name: string, type: ElemType, shape: readonly Dim[]): onnx.onnx.IValueInfoProto {
  return {
    name,
    type: {
      tensorType: {
        elemType: DATA_TYPE[type],
        shape: { dim: shape.map((d) => typeof d === "number" ? { dimValue: d } : { dimParam: d }) },
      },
    },
  };
}

function attribute(name: string, a: Attr): onnx.onnx.IAttributeProto {
  if ("i" in a) return { name, type: ATTR_TYPE.INT, i: a.i };
  if ("f" in a) return { name, type: ATTR_TYPE.FLOAT, f: a.f };
  if ("ints" in a) return { name, type: ATTR_TYPE.INTS, ints: [...a.ints] };
  if ("floats" in a) return { name, type: ATTR_TYPE.FLOATS, floats: [...a.floats] };
  return { name, type: ATTR_TYPE.STRING, s: new TextEncoder().encode(a.s) };
}
