/**
 * Rewrites a CLIP text encoder's graph at load time for two things ONNX
 * exports cannot do by themselves:
 *
 * - **CLIP skip.** `torch.onnx.export` of `CLIPTextModel` (the diffusers
 *   script, Optimum, the pinned nmkd export) returns only
 *   `last_hidden_state`, the last layer's output through
 *   `final_layer_norm`. AUTOMATIC1111's CLIP skip n
 *   (`modules/sd_hijack_clip.py` `FrozenCLIPEmbedderWithCustomWords.encode_with_transformers`:
 *   `outputs.hidden_states[-opts.CLIP_stop_at_last_layers]` then
 *   `transformer.text_model.final_layer_norm`) and diffusers' `clip_skip`
 *   (`pipeline_stable_diffusion.py` `encode_prompt`:
 *   `hidden_states[-(clip_skip + 1)]` then `final_layer_norm`) take the
 *   residual stream n − 1 layers earlier through the same layer norm.
 *   {@link rewriteTextEncoder} finds the final layer norm structurally (a
 *   `LayerNormalization` node, or its decomposed form `Sub(x, ReduceMean(x))
 *   → … → Mul → Add` as older opsets export it) on the path to
 *   `last_hidden_state`, walks the residual stream back through the layers'
 *   residual `Add`s (each CLIP encoder layer is a pre-norm transformer block
 *   with two: `x + self_attn(layer_norm1(x))`, then `h + mlp(layer_norm2(h))`;
 *   the residual operand is the one the other operand is computed from),
 *   and makes `last_hidden_state` a copy of the final layer norm (and any
 *   output cast after it) applied to that earlier state. `pooler_output`
 *   is dropped and the layers no output needs any more are removed.
 * - **Textual-inversion rows.** diffusers `load_textual_inversion`
 *   (`loaders/textual_inversion.py`) resizes the token embedding and writes
 *   each vector into a new row at the end (ids from the tokenizer's size
 *   on). Here the rows are appended to the initializer the token `Gather`
 *   reads (the one table indexed by something computed from `input_ids`),
 *   in its dtype, inline; a table kept in external data is read through the
 *   caller.
 *
 * @module
 */

import onnx from "onnx-proto";
import { float32ToFloat16Bits } from "./fp16.ts";

const P = onnx.onnx;
type NodeProto = onnx.onnx.INodeProto;
type GraphProto = onnx.onnx.IGraphProto;
type TensorProto = onnx.onnx.ITensorProto;

const FLOAT = 1;
const FLOAT16 = 10;
/** Ops whose output depends on their input's shape only. */
const SHAPE_ONLY: ReadonlySet<string> = new Set(["Shape", "Size"]);
/** Ops between the final layer norm and the graph output (an io16 export casts). */
const PASS_THROUGH: ReadonlySet<string> = new Set(["Cast", "Identity"]);

/**
 * The version of {@link rewriteTextEncoder}'s output: part of the rewrite's
 * name the optimised-graph cache keys the graph by ({@link textEncoderRewriteName}).
 */
export const TEXT_ENCODER_REWRITE_VERSION = 1;

/** A text-encoder graph this rewrite cannot work on; the message says what was found. */
export class TextEncoderGraphError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "TextEncoderGraphError";
  }
}

/** What to do to the graph. */
export interface TextEncoderRewrite {
  /** AUTOMATIC1111's CLIP skip (1 = unchanged). */
  clipSkip: number;
  /**
   * Rows to append to the token-embedding table, in order: each named
   * block `count × width` float32 values, row-major; absent or empty = none.
   */
  rows?: ReadonlyArray<{ name: string; values: Float32Array; count: number }>;
}

/** What {@link rewriteTextEncoder} did. */
export interface RewrittenTextEncoder {
  /** The rewritten model. */
  model: Uint8Array;
  /** Rows of the token table before the append, and its width. */
  table: { name: string; rows: number; width: number };
  /** Encoder layers found on the residual stream (residual adds / 2), when clip skip was asked. */
  layers?: number;
  /** The final layer norm's form. */
  layerNorm?: "LayerNormalization" | "decomposed";
}

/** Reads `length` bytes at `offset` of an external data file named by its recorded location. */
export type ExternalReader = (
  location: string,
  offset: number,
  length: number | undefined,
) => Promise<Uint8Array>;

/**
 * The name of a rewrite of one file, for the optimised-graph cache: the
 * clip skip and the sha256 of the appended rows (so other embeddings get
 * another cached graph).
 */
export function textEncoderRewriteName(clipSkip: number, rowsSha256: string | null): string {
  return `text_encoder: clip skip ${clipSkip}, rows ${rowsSha256 ?? "none"}, ` +
    `v${TEXT_ENCODER_REWRITE_VERSION}`;
}

/**
 * The token-embedding table of a text encoder: its name, rows and width
 * (for checking embedding widths before anything is rewritten).
 */
export function tokenTable(bytes: Uint8Array): { name: string; rows: number; width: number } {
  const graph = decodeGraph(bytes).graph;
  const t = findTokenTable(graph, new Index(graph));
  return { name: t.init.name!, rows: t.rows, width: t.width };
}

/**
 * Rewrites a text encoder (`.onnx` bytes) as {@link TextEncoderRewrite}
 * says (see the module documentation). The input bytes are not modified.
 *
 * @throws TextEncoderGraphError when the graph has no token table, no final
 *   layer norm, too few layers for `clipSkip`, or rows of another width
 */
export async function rewriteTextEncoder(
  bytes: Uint8Array,
  rewrite: TextEncoderRewrite,
  readExternal?: ExternalReader,
): Promise<RewrittenTextEncoder> {
  const { model, graph } = decodeGraph(bytes);
  const index = new Index(graph);
  const table = findTokenTable(graph, index);
  const result: Omit<RewrittenTextEncoder, "model"> = {
    table: { name: table.init.name!, rows: table.rows, width: table.width },
  };
  const rows = rewrite.rows ?? [];
  if (rows.length > 0) {
    for (const r of rows) {
      if (r.count < 1 || r.values.length !== r.count * table.width) {
        throw new TextEncoderGraphError(
          `embedding "${r.name}" has vectors of width ${
            r.count > 0 ? r.values.length / r.count : 0
          }; this text encoder's token embeddings are ${table.width} wide (an embedding ` +
            `made for another model, e.g. SD 2.x or SDXL, does not fit SD 1.x)`,
        );
      }
    }
    const values = new Float32Array(rows.reduce((n, r) => n + r.values.length, 0));
    let at = 0;
    for (const r of rows) {
      values.set(r.values, at);
      at += r.values.length;
    }
    await appendRows(table.init, table.rows, table.width, values, readExternal);
  }
  if (rewrite.clipSkip > 1) Object.assign(result, skipLayers(graph, index, rewrite.clipSkip));
  return { model: P.ModelProto.encode(model).finish(), ...result };
}

function decodeGraph(bytes: Uint8Array): { model: onnx.onnx.ModelProto; graph: GraphProto } {
  const model = P.ModelProto.decode(bytes);
  if (!model.graph) throw new Error("not an ONNX model: no graph");
  return { model, graph: model.graph };
}

/** Producers and consumers of every tensor, and ancestry questions. */
class Index {
  readonly produced = new Map<string, NodeProto>();
  readonly consumers = new Map<string, NodeProto[]>();
  readonly initializers = new Map<string, TensorProto>();

  constructor(graph: GraphProto) {
    for (const t of graph.initializer ?? []) this.initializers.set(t.name!, t);
    for (const n of graph.node ?? []) {
      for (const o of n.output ?? []) if (o) this.produced.set(o, n);
      for (const i of n.input ?? []) {
        if (!i) continue;
        const list = this.consumers.get(i) ?? [];
        list.push(n);
        this.consumers.set(i, list);
      }
    }
  }

  /** Every tensor `tensor` is computed from (itself included). */
  ancestors(tensor: string): Set<string> {
    return reach(tensor, (t) => (this.produced.get(t)?.input ?? []).filter((i) => i));
  }

  /**
   * Whether `a` is computed from the values of `b`, not only from its shape:
   * the walk does not pass `Shape` and `Size` (a position-id `Gather`
   * indexed by `Range(0, Shape(input_ids)[1])` depends on the ids' length only).
   */
  dependsOnValues(a: string, b: string): boolean {
    const seen = new Set<string>();
    const stack = [a];
    while (stack.length > 0) {
      const t = stack.pop()!;
      if (t === b) return true;
      if (seen.has(t)) continue;
      seen.add(t);
      const node = this.produced.get(t);
      if (!node || SHAPE_ONLY.has(node.opType ?? "")) continue;
      for (const i of node.input ?? []) if (i) stack.push(i);
    }
    return false;
  }
}

/** The initializer a `Gather` on token ids reads: `[rows, width]`, indexed by `input_ids`' values. */
function findTokenTable(
  graph: GraphProto,
  index: Index,
): { init: TensorProto; rows: number; width: number } {
  const ids = (graph.input ?? []).find((i) => i.name === "input_ids")?.name;
  if (!ids) throw new TextEncoderGraphError("the text encoder has no input `input_ids`");
  const found: Array<{ init: TensorProto; rows: number; width: number }> = [];
  for (const n of graph.node ?? []) {
    if (n.opType !== "Gather") continue;
    const [data, indices] = n.input ?? [];
    const init = index.initializers.get(data ?? "");
    if (!init || (init.dims ?? []).length !== 2 || !indices) continue;
    // The token ids index the table; position ids only take the sequence length from them.
    if (!index.dependsOnValues(indices, ids)) continue;
    const [rows, width] = (init.dims ?? []).map(num);
    found.push({ init, rows, width });
  }
  if (found.length !== 1) {
    throw new TextEncoderGraphError(
      `expected one token-embedding table (a Gather of a 2-D initializer by the token ids), ` +
        `found ${found.length}`,
    );
  }
  const t = found[0];
  if (t.init.dataType !== FLOAT && t.init.dataType !== FLOAT16) {
    throw new TextEncoderGraphError(
      `the token-embedding table ${t.init.name} has data type ${t.init.dataType}; ` +
        `float32 and float16 are supported`,
    );
  }
  return t;
}

const num = (d: number | { toNumber(): number }) => typeof d === "number" ? d : d.toNumber();

/** Appends `values` as rows to `init`, inline, in its dtype. */
async function appendRows(
  init: TensorProto,
  rows: number,
  width: number,
  values: Float32Array,
  readExternal?: ExternalReader,
): Promise<void> {
  const half = init.dataType === FLOAT16;
  const elem = half ? 2 : 4;
  let raw: Uint8Array;
  if (init.dataLocation === P.TensorProto.DataLocation.EXTERNAL) {
    const kv = new Map((init.externalData ?? []).map((e) => [e.key, e.value]));
    const location = kv.get("location");
    if (!location || !readExternal) {
      throw new TextEncoderGraphError(
        `the token-embedding table ${init.name} is in external data that cannot be read`,
      );
    }
    const offset = Number(kv.get("offset") ?? 0);
    const length = kv.has("length") ? Number(kv.get("length")) : rows * width * elem;
    raw = await readExternal(location, offset, length);
  } else if (init.rawData && init.rawData.length > 0) {
    raw = init.rawData;
  } else if (!half && (init.floatData ?? []).length > 0) {
    raw = new Uint8Array(Float32Array.from(init.floatData!).buffer);
  } else if (half && (init.int32Data ?? []).length > 0) {
    raw = new Uint8Array(Uint16Array.from(init.int32Data!).buffer);
  } else {
    throw new TextEncoderGraphError(`the token-embedding table ${init.name} holds no data`);
  }
  if (raw.length !== rows * width * elem) {
    throw new TextEncoderGraphError(
      `the token-embedding table ${init.name} holds ${raw.length} bytes, expected ${
        rows * width * elem
      }`,
    );
  }
  const added = half
    ? new Uint8Array(float32ToFloat16Bits(values).buffer)
    : new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
  const out = new Uint8Array(raw.length + added.length);
  out.set(raw, 0);
  out.set(added, raw.length);
  init.rawData = out;
  init.floatData = [];
  init.int32Data = [];
  init.externalData = [];
  init.dataLocation = P.TensorProto.DataLocation.DEFAULT;
  init.dims = [rows + values.length / width, width];
}

/** Makes `last_hidden_state` the state `clipSkip − 1` layers earlier through the final layer norm. */
function skipLayers(
  graph: GraphProto,
  index: Index,
  clipSkip: number,
): { layers: number; layerNorm: "LayerNormalization" | "decomposed" } {
  const OUT = "last_hidden_state";
  if (!(graph.output ?? []).some((o) => o.name === OUT)) {
    throw new TextEncoderGraphError(`clip skip needs the output \`${OUT}\`, which is missing`);
  }
  const norm = findFinalNorm(index, OUT);
  // The residual stream: each residual Add's operand the other operand is computed from.
  const stream: string[] = [norm.input];
  for (;;) {
    const add = index.produced.get(stream[stream.length - 1]);
    if (!add || add.opType !== "Add" || (add.input ?? []).length !== 2) break;
    const [a, b] = add.input!;
    if (index.initializers.has(a) || index.initializers.has(b)) break;
    const next = index.dependsOnValues(b, a) ? a : index.dependsOnValues(a, b) ? b : null;
    if (next === null) break;
    stream.push(next);
  }
  const layers = Math.floor((stream.length - 1) / 2);
  if (layers < clipSkip) {
    throw new TextEncoderGraphError(
      `clip_skip ${clipSkip} needs at least ${clipSkip} encoder layers; ` +
        `this text encoder has ${layers} (counted by their residual adds)`,
    );
  }
  const state = stream[2 * (clipSkip - 1)];

  // Copy every node between the final norm's input and the output, reading `state` instead.
  const fromNorm = descendants(index, norm.input);
  const toOut = index.ancestors(OUT);
  const suffix = `/clip_skip_${clipSkip}`;
  const copies: NodeProto[] = [];
  const renamed = (t: string) => t === norm.input ? state : `${t}${suffix}`;
  for (const n of graph.node ?? []) {
    const outs = n.output ?? [];
    if (!outs.some((o) => toOut.has(o) && fromNorm.has(o))) continue;
    copies.push(P.NodeProto.create({
      ...n,
      name: `${n.name ?? n.opType}${suffix}`,
      input: (n.input ?? []).map((i) => (i && fromNorm.has(i)) ? renamed(i) : i),
      output: outs.map((o) => `${o}${suffix}`),
    }));
  }
  // The original output tensor gets another name; the copy's becomes `last_hidden_state`.
  const unskipped = `${OUT}/unskipped`;
  for (const n of graph.node ?? []) {
    n.input = (n.input ?? []).map((i) => i === OUT ? unskipped : i);
    n.output = (n.output ?? []).map((o) => o === OUT ? unskipped : o);
  }
  for (const c of copies) {
    c.output = c.output!.map((o) => o === `${OUT}${suffix}` ? OUT : o);
  }
  graph.node = [...(graph.node ?? []), ...copies];
  graph.output = (graph.output ?? []).filter((o) => o.name === OUT);
  prune(graph);
  return { layers, layerNorm: norm.form };
}

/** Tensors computed from `tensor` (itself included). */
function descendants(index: Index, tensor: string): Set<string> {
  return reach(tensor, (t) => (index.consumers.get(t) ?? []).flatMap((n) => n.output ?? []));
}

/** Every tensor reached from `start` by following `next` (itself included). */
function reach(start: string, next: (tensor: string) => readonly string[]): Set<string> {
  const seen = new Set<string>();
  const stack = [start];
  while (stack.length > 0) {
    const t = stack.pop()!;
    if (seen.has(t)) continue;
    seen.add(t);
    stack.push(...next(t));
  }
  return seen;
}

/** The final layer norm on the way to `output`: its input and form. */
function findFinalNorm(
  index: Index,
  output: string,
): { input: string; form: "LayerNormalization" | "decomposed" } {
  // Breadth-first from the output: the nearest LayerNormalization, or Sub(x, ReduceMean(x)).
  const queue = [output];
  const seen = new Set<string>();
  while (queue.length > 0) {
    const t = queue.shift()!;
    if (seen.has(t)) continue;
    seen.add(t);
    const n = index.produced.get(t);
    if (!n) continue;
    if (n.opType === "LayerNormalization") {
      return { input: n.input![0], form: "LayerNormalization" };
    }
    if (n.opType === "Sub") {
      const [x, m] = n.input ?? [];
      const mean = index.produced.get(m ?? "");
      if (mean?.opType === "ReduceMean" && mean.input?.[0] === x) {
        return { input: x, form: "decomposed" };
      }
    }
    if (!PASS_THROUGH.has(n.opType ?? "") && !NORM_TAIL.has(n.opType ?? "")) continue;
    for (const i of n.input ?? []) if (i && !index.initializers.has(i)) queue.push(i);
  }
  throw new TextEncoderGraphError(
    "clip skip needs the final layer norm before `last_hidden_state`; none was found " +
      "(neither a LayerNormalization node nor its decomposed form Sub(x, ReduceMean(x)))",
  );
}

/** Ops of a decomposed layer norm, walked through from its output back to `Sub(x, mean)`. */
const NORM_TAIL: ReadonlySet<string> = new Set(["Add", "Mul", "Div", "Sqrt", "Pow", "ReduceMean"]);

/** Removes nodes and initializers no graph output needs. Nodes with subgraphs are kept. */
function prune(graph: GraphProto): void {
  const live = new Set((graph.output ?? []).map((o) => o.name!));
  const nodes = graph.node ?? [];
  const keep: boolean[] = new Array(nodes.length).fill(false);
  for (let k = nodes.length - 1; k >= 0; k--) {
    const n = nodes[k];
    const hasGraph = (n.attribute ?? []).some((a) => a.g || (a.graphs ?? []).length > 0);
    if (!hasGraph && !(n.output ?? []).some((o) => live.has(o))) continue;
    keep[k] = true;
    for (const i of n.input ?? []) if (i) live.add(i);
  }
  graph.node = nodes.filter((_, k) => keep[k]);
  graph.initializer = (graph.initializer ?? []).filter((t) => live.has(t.name!));
  graph.valueInfo = (graph.valueInfo ?? []).filter((v) => live.has(v.name!));
}
