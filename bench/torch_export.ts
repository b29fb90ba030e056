/**
 * Hands an ONNX model and its feeds to `torch_onnx.py`, which runs the same
 * graph with the same weights in PyTorch: the torch side of
 * `deno task bench:gpu --torch PYTHON` (the same random-weight UNet in
 * ONNX Runtime and in torch, same inputs, same process tree).
 *
 * Writes `graph.json` (nodes with their attributes; initializers as
 * references into the model's external-data files, by absolute path,
 * offset and length, or inline as base64 when the model stores them inline;
 * the feeds as references into `feeds.bin`) and `feeds.bin`. No weight is
 * copied: torch reads them from the model's own files.
 *
 * @module
 */

import { dirname, join, resolve } from "node:path";
import { Buffer } from "node:buffer";
import onnx from "onnx-proto";
import type { Tensor } from "../mod/onnx/mod.ts";

/** ONNX TensorProto.DataType → the dtype names `torch_onnx.py` reads. */
const DTYPES: Record<number, string> = {
  1: "float32",
  6: "int32",
  7: "int64",
  9: "bool",
  10: "float16",
  11: "float64",
};

/** One initializer or feed as torch_onnx.py reads it. */
interface TensorRef {
  name: string;
  dtype: string;
  dims: number[];
  /** Absolute path of the file holding the bytes, with `offset` and `length`… */
  file?: string;
  offset?: number;
  length?: number;
  /** …or the bytes themselves. */
  base64?: string;
}

type AttrValue = number | string | number[] | string[];

const num = (v: unknown) => Number(v);

function attribute(a: onnx.onnx.IAttributeProto): AttrValue {
  switch (a.type) {
    case onnx.onnx.AttributeProto.AttributeType.INT:
      return num(a.i);
    case onnx.onnx.AttributeProto.AttributeType.FLOAT:
      return a.f ?? 0;
    case onnx.onnx.AttributeProto.AttributeType.STRING:
      return new TextDecoder().decode(a.s ?? new Uint8Array());
    case onnx.onnx.AttributeProto.AttributeType.INTS:
      return (a.ints ?? []).map(num);
    case onnx.onnx.AttributeProto.AttributeType.FLOATS:
      return [...(a.floats ?? [])];
    default:
      throw new Error(`torch export: attribute ${a.name} of type ${a.type} is not supported`);
  }
}

function initializerRef(t: onnx.onnx.ITensorProto, modelDir: string): TensorRef {
  const dtype = DTYPES[t.dataType ?? 0];
  if (!dtype) throw new Error(`torch export: initializer ${t.name} has ONNX type ${t.dataType}`);
  const ref: TensorRef = { name: t.name ?? "", dtype, dims: (t.dims ?? []).map(num) };
  const ext = Object.fromEntries((t.externalData ?? []).map((e) => [e.key, e.value]));
  if (ext.location) {
    ref.file = resolve(modelDir, ext.location as string);
    ref.offset = Number(ext.offset ?? 0);
    ref.length = Number(ext.length);
    return ref;
  }
  let bytes: Uint8Array;
  if (t.rawData && t.rawData.length > 0) bytes = t.rawData;
  else if (t.floatData && t.floatData.length > 0) {
    bytes = new Uint8Array(Float32Array.from(t.floatData).buffer);
  } else if (t.int64Data && t.int64Data.length > 0) {
    bytes = new Uint8Array(BigInt64Array.from(t.int64Data.map((v) => BigInt(String(v)))).buffer);
  } else if (t.int32Data && t.int32Data.length > 0) {
    bytes = new Uint8Array(Int32Array.from(t.int32Data).buffer);
  } else bytes = new Uint8Array();
  ref.base64 = Buffer.from(bytes).toString("base64");
  return ref;
}

/**
 * Writes the export of `modelPath` with `feeds` into `dir`; returns the path
 * of `graph.json`. Feeds must be CPU tensors (their bytes are written).
 */
export async function exportForTorch(
  modelPath: string,
  feeds: Record<string, Tensor>,
  dir: string,
): Promise<string> {
  const model = onnx.onnx.ModelProto.decode(await Deno.readFile(modelPath));
  const graph = model.graph;
  if (!graph) throw new Error(`${modelPath}: no graph`);
  const modelDir = dirname(resolve(modelPath));
  const chunks: Uint8Array[] = [];
  let offset = 0;
  const feedRefs: TensorRef[] = Object.entries(feeds).map(([name, t]) => {
    const data = t.data as unknown as ArrayBufferView;
    const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    chunks.push(bytes);
    const ref = {
      name,
      dtype: t.type,
      dims: [...t.dims],
      file: join(dir, "feeds.bin"),
      offset,
      length: bytes.length,
    };
    offset += bytes.length;
    return ref;
  });
  await Deno.mkdir(dir, { recursive: true });
  const all = new Uint8Array(offset);
  let at = 0;
  for (const c of chunks) {
    all.set(c, at);
    at += c.length;
  }
  await Deno.writeFile(join(dir, "feeds.bin"), all);
  const out = {
    model: resolve(modelPath),
    inputs: (graph.input ?? []).map((i) => i.name),
    outputs: (graph.output ?? []).map((o) => o.name),
    nodes: (graph.node ?? []).map((n) => ({
      op: n.opType,
      domain: n.domain ?? "",
      inputs: n.input ?? [],
      outputs: n.output ?? [],
      attrs: Object.fromEntries((n.attribute ?? []).map((a) => [a.name, attribute(a)])),
    })),
    initializers: (graph.initializer ?? []).map((t) => initializerRef(t, modelDir)),
    feeds: feedRefs,
  };
  const path = join(dir, "graph.json");
  await Deno.writeTextFile(path, JSON.stringify(out));
  return path;
}
