/**
 * Test helpers: the attention-score graph torch's exporter writes for
 * diffusers' `baddbmm` (`Add(Mul(MatMul(q, kᵀ), alpha), Mul(ConstantOfShape(
 * [q0, q1, k1], 0), beta))`, then a Softmax), with variations the rewrite
 * must leave alone, and a runner.
 *
 * @module
 */

import onnx from "onnx-proto";
import { createSessionFromBytes } from "./runtime.ts";
import { floatTensor, toFloat32 } from "./tensors.ts";

const P = onnx.onnx;
const FLOAT = 1;
const INT64 = 7;

/** Variations of the graph torch writes for diffusers' `baddbmm` attention scores. */
export interface AttentionVariant {
  /** The ConstantOfShape fill value. */
  fill?: number;
  /** beta, the factor of the zero term (none: the fill is added directly). */
  beta?: number | null;
  /** alpha, the scale of the product (none: the product is added directly). */
  alpha?: number | null;
  /** Which (tensor, dim) pairs build the fill's shape. */
  shape?: Array<["q" | "k", number]>;
  /** The Add's output is the graph output (nothing to rewire). */
  addIsOutput?: boolean;
  /**
   * A query projection before the scores: `MatMul(xq as [q0·q1, q2], W)`,
   * node `/attn/to_q/MatMul`, W [q2, q2] stored inline (what a LoRA patches).
   */
  projection?: Float32Array;
}

/** The shapes of q and k: [batch·heads, tokens, head width]. */
export const Q = [2, 6, 8];
/** See {@link Q}. */
export const K = [2, 5, 8];

function scalar(name: string, value: number, type = FLOAT): onnx.onnx.INodeProto {
  const raw = type === INT64
    ? new Uint8Array(BigInt64Array.of(BigInt(value)).buffer)
    : new Uint8Array(Float32Array.of(value).buffer);
  return {
    opType: "Constant",
    name,
    output: [name],
    attribute: [{ name: "value", type: 4, t: { dims: [], dataType: type, rawData: raw } }],
  };
}

function ints64(name: string, values: number[]): onnx.onnx.ITensorProto {
  return {
    name,
    dims: [values.length],
    dataType: INT64,
    rawData: new Uint8Array(BigInt64Array.from(values.map(BigInt)).buffer),
  };
}

/**
 * `out = Softmax(Mul(MatMul(q, kᵀ), alpha) + Mul(ConstantOfShape([q0, q1, k1], 0), beta))`,
 * q and k reshaped from the inputs as the exporter does (so their rank is known).
 */
export function attentionScoresModel(v: AttentionVariant = {}): Uint8Array {
  const nodes: onnx.onnx.INodeProto[] = [];
  const node = (
    opType: string,
    input: string[],
    output: string,
    attribute: onnx.onnx.IAttributeProto[] = [],
  ) => nodes.push({ opType, input, output: [output], name: `/attn/${output}`, attribute });
  const initializer = [ints64("q_shape", Q), ints64("k_shape", K), ints64("axes0", [0])];
  if (v.projection) {
    initializer.push(ints64("rows_shape", [Q[0] * Q[1], Q[2]]), {
      name: "to_q.weight",
      dims: [Q[2], Q[2]],
      dataType: FLOAT,
      rawData: new Uint8Array(Float32Array.from(v.projection).buffer),
    });
    node("Reshape", ["xq", "rows_shape"], "rows");
    nodes.push({
      opType: "MatMul",
      input: ["rows", "to_q.weight"],
      output: ["projected"],
      name: "/attn/to_q/MatMul",
    });
  }
  node("Reshape", [v.projection ? "projected" : "xq", "q_shape"], "q");
  node("Reshape", ["xk", "k_shape"], "k");
  node("Transpose", ["k"], "kt", [{ name: "perm", type: 7, ints: [0, 2, 1] }]);
  node("MatMul", ["q", "kt"], "m");
  let x = "m";
  if (v.alpha !== null) {
    nodes.push(scalar("alpha", v.alpha ?? 0.35));
    node("Mul", ["m", "alpha"], "scaled");
    x = "scaled";
  }
  const parts = (v.shape ?? [["q", 0], ["q", 1], ["k", 1]]).map(([t, d], i) => {
    node("Shape", [t], `shape${i}`);
    nodes.push(scalar(`index${i}`, d, INT64));
    node("Gather", [`shape${i}`, `index${i}`], `dim${i}`, [{ name: "axis", type: 2, i: 0 }]);
    node("Unsqueeze", [`dim${i}`, "axes0"], `part${i}`);
    return `part${i}`;
  });
  node("Concat", parts, "fill_shape", [{ name: "axis", type: 2, i: 0 }]);
  node("ConstantOfShape", ["fill_shape"], "fill", [{
    name: "value",
    type: 4,
    t: { dims: [1], dataType: FLOAT, rawData: new Uint8Array(Float32Array.of(v.fill ?? 0).buffer) },
  }]);
  let z = "fill";
  if (v.beta !== null) {
    nodes.push(scalar("beta", v.beta ?? 0));
    node("Mul", ["fill", "beta"], "zero");
    z = "zero";
  }
  node("Add", [x, z], "scores");
  if (!v.addIsOutput) node("Softmax", ["scores"], "out", [{ name: "axis", type: 2, i: -1 }]);
  const out = v.addIsOutput ? "scores" : "out";
  const io = (name: string, dims: number[]): onnx.onnx.IValueInfoProto => ({
    name,
    type: { tensorType: { elemType: FLOAT, shape: { dim: dims.map((d) => ({ dimValue: d })) } } },
  });
  return P.ModelProto.encode({
    irVersion: 8,
    opsetImport: [{ domain: "", version: 17 }],
    graph: {
      name: "attention_scores",
      node: nodes,
      initializer,
      input: [io("xq", [Q[0] * Q[1] * Q[2]]), io("xk", [K[0] * K[1] * K[2]])],
      output: [io(out, [Q[0], Q[1], K[1]])],
    },
  }).finish();
}

/** Runs an {@link attentionScoresModel} on fixed inputs; returns its output. */
export async function runAttentionScores(bytes: Uint8Array): Promise<Float32Array> {
  const s = await createSessionFromBytes(bytes, [], { intraOpThreads: 1 });
  try {
    const xq = Float32Array.from({ length: Q[0] * Q[1] * Q[2] }, (_, i) => Math.sin(i * 0.7) * 2);
    const xk = Float32Array.from({ length: K[0] * K[1] * K[2] }, (_, i) => Math.cos(i * 0.3) * 2);
    const out = await s.run({
      xq: floatTensor("float32", xq, [xq.length]),
      xk: floatTensor("float32", xk, [xk.length]),
    });
    return toFloat32(out[s.outputs[0].name]);
  } finally {
    await s.release();
  }
}
