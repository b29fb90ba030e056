/**
 * Removes the all-zero addend that torch's exporter leaves in diffusers'
 * attention: `Attention.get_attention_scores` (diffusers
 * `models/attention_processor.py`, the `AttnProcessor` that runs when torch
 * has no `scaled_dot_product_attention`, e.g. torch < 2.0, as in the exports
 * of `scripts/convert_stable_diffusion_checkpoint_to_onnx.py` made with it)
 * computes the scores as
 *
 * ```py
 * baddbmm_input = torch.empty(query.shape[0], query.shape[1], key.shape[1])
 * beta = 0
 * attention_scores = torch.baddbmm(baddbmm_input, query, key.transpose(-1, -2),
 *                                  beta=beta, alpha=self.scale)
 * ```
 *
 * and the exporter writes `baddbmm` as `Add(Mul(MatMul(q, kᵀ), alpha),
 * Mul(ConstantOfShape(shape, 0), beta))`. The second term is zero, but ONNX
 * Runtime computes it: one extra tensor of the scores' size, [batch·heads,
 * tokens, tokens] float32, per attention call: 537 MB at 512² in the first
 * and last UNet blocks. On a full-size SD 1.5 UNet exported that way (batch 1,
 * 64×64 latents, 2 CPU threads) dropping it takes the run's peak RSS from
 * 5.85 GB to 5.11 GB and a UNet call from 5.5 s to 4.1 s (docs/performance.md,
 * "A diffusers-script export").
 *
 * {@link dropZeroAddends} rewires each such `Add` to its first term, only where
 * it can prove that this changes nothing: the addend is a `ConstantOfShape`
 * of value 0 (times a finite scalar constant, or not), and its shape is built
 * as `[q.shape[0], q.shape[1], k.shape[1]]` from the very tensors the
 * `MatMul(q, Transpose(k, [0, 2, 1]))` multiplies, with q of rank 3 — so the
 * `Add`'s broadcast shape is the product's own. Then `x + 0 = x` for every
 * value (a −0 would become +0; the scores feed a softmax, where the two are
 * the same). The nodes only the addend used are removed with it. Anything
 * else is left as it is.
 *
 * @module
 */

import onnx from "onnx-proto";
import { fromFloat16Bits } from "./fp16.ts";

type Graph = onnx.onnx.IGraphProto;
type NodeProto = onnx.onnx.INodeProto;
type TensorProto = onnx.onnx.ITensorProto;

/** What {@link dropZeroAddends} changed. */
export interface ZeroAddendReport {
  /** `Add` nodes whose zero term was dropped. */
  adds: number;
  /** Nodes removed in all (the `Add`s and what only their zero terms used). */
  nodes: number;
}

/** TensorProto.DataType codes (onnx/onnx.proto). */
const FLOAT = 1, INT32 = 6, INT64 = 7, FLOAT16 = 10, DOUBLE = 11;

const num = (v: number | { toNumber(): number }) => typeof v === "number" ? v : v.toNumber();

/** The values of a small tensor, or undefined for a type or storage this does not read. */
function tensorValues(t: TensorProto): { dims: number[]; values: number[] } | undefined {
  if (t.dataLocation === onnx.onnx.TensorProto.DataLocation.EXTERNAL) return undefined;
  const dims = (t.dims ?? []).map(num);
  const raw = t.rawData && t.rawData.length > 0 ? t.rawData : undefined;
  const view = raw ? new DataView(raw.buffer, raw.byteOffset, raw.byteLength) : undefined;
  const read = (bytes: number, get: (at: number) => number, typed?: ArrayLike<unknown>) => {
    if (view) return Array.from({ length: view.byteLength / bytes }, (_, i) => get(i * bytes));
    return Array.from(typed ?? [], (v) => num(v as number));
  };
  let values: number[];
  switch (t.dataType) {
    case FLOAT:
      values = read(4, (a) => view!.getFloat32(a, true), t.floatData ?? []);
      break;
    case DOUBLE:
      values = read(8, (a) => view!.getFloat64(a, true), t.doubleData ?? []);
      break;
    case FLOAT16:
      // int32_data holds the bit patterns when raw_data is not used.
      values = read(2, (a) => view!.getUint16(a, true), t.int32Data ?? [])
        .map((bits) => fromFloat16Bits(bits));
      break;
    case INT32:
      values = read(4, (a) => view!.getInt32(a, true), t.int32Data ?? []);
      break;
    case INT64:
      values = read(8, (a) => Number(view!.getBigInt64(a, true)), t.int64Data ?? []);
      break;
    default:
      return undefined;
  }
  const size = dims.reduce((a, b) => a * b, 1);
  return values.length === size ? { dims, values } : undefined;
}

/** The graph's producers, initializers and use counts, for the matcher. */
class Index {
  readonly producer = new Map<string, NodeProto>();
  readonly inits = new Map<string, TensorProto>();
  readonly uses = new Map<string, number>();
  readonly outputs: ReadonlySet<string>;

  constructor(graph: Graph) {
    for (const n of graph.node ?? []) {
      for (const o of n.output ?? []) this.producer.set(o, n);
      for (const i of n.input ?? []) if (i) this.uses.set(i, (this.uses.get(i) ?? 0) + 1);
    }
    for (const t of graph.initializer ?? []) if (t.name) this.inits.set(t.name, t);
    this.outputs = new Set((graph.output ?? []).map((o) => o.name ?? ""));
  }

  /** The node producing `name` when it is of type `op` (default domain). */
  made(name: string | undefined, op: string): NodeProto | undefined {
    const n = name ? this.producer.get(name) : undefined;
    return n && n.opType === op && !n.domain ? n : undefined;
  }

  /** A constant's values: an initializer or a `Constant` node. */
  constant(name: string | undefined): { dims: number[]; values: number[] } | undefined {
    if (!name) return undefined;
    const init = this.inits.get(name);
    if (init) return tensorValues(init);
    const n = this.made(name, "Constant");
    if (!n) return undefined;
    const a = n.attribute?.[0];
    if (!a || n.attribute!.length !== 1) return undefined;
    if (a.name === "value" && a.t) return tensorValues(a.t);
    if (a.name === "value_float" && a.f !== undefined && a.f !== null) {
      return { dims: [], values: [a.f] };
    }
    if (a.name === "value_int" && a.i !== undefined && a.i !== null) {
      return { dims: [], values: [num(a.i)] };
    }
    if (a.name === "value_ints") return { dims: [a.ints!.length], values: a.ints!.map(num) };
    return undefined;
  }

  /** Whether `name` is a finite scalar (rank 0) constant. */
  finiteScalar(name: string | undefined): boolean {
    const c = this.constant(name);
    return !!c && c.dims.length === 0 && c.values.length === 1 && Number.isFinite(c.values[0]);
  }
}

/** An attribute's integer list (`perm`, `axes`), if set. */
function ints(n: NodeProto, name: string): number[] | undefined {
  const a = n.attribute?.find((x) => x.name === name);
  return a?.ints ? a.ints.map(num) : undefined;
}

/** An attribute's integer, or `fallback` when unset. */
function int(n: NodeProto, name: string, fallback: number): number {
  const a = n.attribute?.find((x) => x.name === name);
  return a?.i !== undefined && a.i !== null ? num(a.i) : fallback;
}

/** The `ConstantOfShape` of value 0 that `name` is (possibly times a finite scalar). */
function zeroFill(ix: Index, name: string): NodeProto | undefined {
  const isZeroFill = (v: string | undefined) => {
    const c = ix.made(v, "ConstantOfShape");
    if (!c) return undefined;
    const value = c.attribute?.find((a) => a.name === "value");
    // Without `value` the fill is float32 0 (ONNX ConstantOfShape).
    if (!value) return c;
    const t = value.t ? tensorValues(value.t) : undefined;
    return t && t.values.length === 1 && t.values[0] === 0 ? c : undefined;
  };
  const direct = isZeroFill(name);
  if (direct) return direct;
  const mul = ix.made(name, "Mul");
  if (!mul || mul.input?.length !== 2) return undefined;
  const [a, b] = mul.input;
  if (ix.finiteScalar(b)) return isZeroFill(a);
  if (ix.finiteScalar(a)) return isZeroFill(b);
  return undefined;
}

/** Whether `name` is the output of a `Reshape` to a 3-element shape (so: rank 3). */
function rank3(ix: Index, name: string): boolean {
  const r = ix.made(name, "Reshape");
  if (!r) return false;
  const shape = r.input?.[1];
  const concat = ix.made(shape, "Concat");
  if (concat) return concat.input?.length === 3 && concat.input.every((i) => oneElement(ix, i));
  const c = ix.constant(shape);
  return !!c && c.dims.length === 1 && c.values.length === 3;
}

/**
 * Whether a piece of a shape is one element: a [1] constant, or an
 * `Unsqueeze` (a shape is 1-D, and only a scalar unsqueezes to 1-D).
 */
function oneElement(ix: Index, name: string): boolean {
  const c = ix.constant(name);
  if (c) return c.dims.length === 1 && c.values.length === 1;
  return ix.made(name, "Unsqueeze") !== undefined;
}

/** `Unsqueeze(Gather(Shape(t), i), axes = [0])`: the tensor and the index. */
function unsqueezedDim(ix: Index, name: string): { tensor: string; index: number } | undefined {
  const u = ix.made(name, "Unsqueeze");
  if (!u) return undefined;
  const axes = ints(u, "axes") ?? ix.constant(u.input?.[1])?.values;
  if (!axes || axes.length !== 1 || axes[0] !== 0) return undefined;
  const g = ix.made(u.input?.[0], "Gather");
  if (!g || int(g, "axis", 0) !== 0) return undefined;
  const index = ix.constant(g.input?.[1]);
  if (!index || index.dims.length !== 0) return undefined;
  const s = ix.made(g.input?.[0], "Shape");
  if (!s || s.attribute?.some((a) => a.name === "start" || a.name === "end")) return undefined;
  return { tensor: s.input![0], index: index.values[0] };
}

/**
 * The product `x` is, when it is `MatMul(q, Transpose(k, [0, 2, 1]))`, maybe
 * times a finite scalar constant, with q of rank 3: q and k.
 */
function scores(ix: Index, x: string): { q: string; k: string } | undefined {
  let m = ix.made(x, "MatMul");
  const mul = m ? undefined : ix.made(x, "Mul");
  if (mul && mul.input?.length === 2) {
    const [a, b] = mul.input;
    if (ix.finiteScalar(b)) m = ix.made(a, "MatMul");
    else if (ix.finiteScalar(a)) m = ix.made(b, "MatMul");
  }
  if (!m || m.input?.length !== 2) return undefined;
  const [q, kt] = m.input;
  const t = ix.made(kt, "Transpose");
  const perm = t ? ints(t, "perm") : undefined;
  if (!t || !perm || perm.join() !== "0,2,1") return undefined;
  if (!rank3(ix, q)) return undefined;
  return { q, k: t.input![0] };
}

/** Whether `shape` is `Concat([q.shape[0]], [q.shape[1]], [k.shape[1]])`. */
function isScoresShape(ix: Index, shape: string, q: string, k: string): boolean {
  const c = ix.made(shape, "Concat");
  if (!c || int(c, "axis", 0) !== 0 || c.input?.length !== 3) return false;
  const want = [[q, 0], [q, 1], [k, 1]] as const;
  return c.input.every((i, n) => {
    const d = unsqueezedDim(ix, i);
    return d !== undefined && d.tensor === want[n][0] && d.index === want[n][1];
  });
}

/**
 * Drops every provably zero attention-score addend from `graph` (in place;
 * see the module documentation). A graph with subgraphs is left alone.
 */
export function dropZeroAddends(graph: onnx.onnx.IGraphProto): ZeroAddendReport {
  const nodes = graph.node ?? [];
  // A subgraph (If, Loop, Scan) may read outer values by name, which the use counts do not see.
  if (nodes.some((n) => n.attribute?.some((a) => a.g || (a.graphs?.length ?? 0) > 0))) {
    return { adds: 0, nodes: 0 };
  }
  const ix = new Index(graph);
  const removed = new Set<NodeProto>();
  const rename = new Map<string, string>();
  const dead: NodeProto[] = [];
  for (const n of nodes) {
    if (n.opType !== "Add" || n.domain || n.input?.length !== 2 || n.output?.length !== 1) continue;
    const out = n.output[0];
    if (ix.outputs.has(out)) continue;
    for (const [x, z] of [[n.input[0], n.input[1]], [n.input[1], n.input[0]]]) {
      const fill = zeroFill(ix, z);
      const s = fill ? scores(ix, x) : undefined;
      if (!fill || !s || !isScoresShape(ix, fill.input![0], s.q, s.k)) continue;
      rename.set(out, x);
      removed.add(n);
      ix.uses.set(z, (ix.uses.get(z) ?? 1) - 1);
      const zn = ix.producer.get(z);
      if (zn) dead.push(zn);
      break;
    }
  }
  if (removed.size === 0) return { adds: 0, nodes: 0 };
  const adds = removed.size;
  // What only the zero terms used goes with them.
  while (dead.length > 0) {
    const d = dead.pop()!;
    if (removed.has(d)) continue;
    if ((d.output ?? []).some((o) => (ix.uses.get(o) ?? 0) > 0 || ix.outputs.has(o))) continue;
    removed.add(d);
    for (const i of d.input ?? []) {
      if (!i) continue;
      ix.uses.set(i, (ix.uses.get(i) ?? 1) - 1);
      const p = ix.producer.get(i);
      if (p) dead.push(p);
    }
  }
  const kept = nodes.filter((n) => !removed.has(n));
  const resolve = (name: string) => {
    let v = name;
    while (rename.has(v)) v = rename.get(v)!;
    return v;
  };
  for (const n of kept) {
    if (n.input) n.input = n.input.map((i) => (i ? resolve(i) : i));
  }
  graph.node = kept;
  // Shape annotations of the values that are gone go with them.
  const gone = new Set([...removed].flatMap((n) => n.output ?? []));
  if (graph.valueInfo) graph.valueInfo = graph.valueInfo.filter((v) => !gone.has(v.name ?? ""));
  return { adds, nodes: removed.size };
}
