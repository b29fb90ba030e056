import { deepStrictEqual, ok, strictEqual } from "node:assert";
import onnx from "onnx-proto";
import { dropZeroAddends } from "./zero_addend.ts";
import {
  attentionScoresModel,
  type AttentionVariant,
  K,
  Q,
  runAttentionScores,
} from "./zero_addend_testing.ts";

const P = onnx.onnx;

function rewrite(bytes: Uint8Array) {
  const m = P.ModelProto.decode(bytes);
  const report = dropZeroAddends(m.graph!);
  return {
    report,
    bytes: P.ModelProto.encode(m).finish(),
    ops: m.graph!.node!.map((n) => n.opType),
  };
}

for (
  const [name, v] of [
    ["alpha and beta (the diffusers export)", {}],
    ["no alpha", { alpha: null }],
    ["the fill added directly (no beta)", { beta: null }],
  ] as Array<[string, AttentionVariant]>
) {
  Deno.test(`dropZeroAddends: drops the zero term, same output: ${name}`, async () => {
    const original = attentionScoresModel(v);
    const r = rewrite(original);
    strictEqual(r.report.adds, 1);
    ok(!r.ops.includes("ConstantOfShape") && !r.ops.includes("Add"), r.ops.join(","));
    ok(!r.ops.includes("Concat") && !r.ops.includes("Gather"), "the fill's shape chain is gone");
    // Add, the beta Mul and its Constant, ConstantOfShape, Concat, 3 × (Shape, Constant, Gather, Unsqueeze).
    strictEqual(r.report.nodes, 1 + (v.beta === null ? 0 : 2) + 2 + 3 * 4);
    const [before, after] = [await runAttentionScores(original), await runAttentionScores(r.bytes)];
    strictEqual(after.length, Q[0] * Q[1] * K[1]);
    deepStrictEqual(after, before);
  });
}

for (
  const [name, v] of [
    ["a fill of 1", { fill: 1 }],
    ["an infinite beta (0·∞ is NaN)", { beta: Infinity }],
    // Equal in value (k0 = q0 in this graph), but not provably so from the graph.
    ["a shape built from k's first dimension", { shape: [["k", 0], ["q", 1], ["k", 1]] }],
    ["the Add as the graph output", { addIsOutput: true }],
  ] as Array<[string, AttentionVariant]>
) {
  Deno.test(`dropZeroAddends: leaves the graph alone: ${name}`, async () => {
    const original = attentionScoresModel(v);
    const r = rewrite(original);
    deepStrictEqual(r.report, { adds: 0, nodes: 0 });
    ok(r.ops.includes("ConstantOfShape") && r.ops.includes("Add"));
    // Still a valid model that runs as before.
    deepStrictEqual(await runAttentionScores(r.bytes), await runAttentionScores(original));
  });
}

Deno.test("dropZeroAddends: a graph with a subgraph is left alone (it may read the Add by name)", () => {
  const m = P.ModelProto.decode(attentionScoresModel());
  m.graph!.node!.push({
    opType: "If",
    input: ["cond"],
    output: ["branch"],
    attribute: [{
      name: "then_branch",
      type: 5,
      g: { name: "then", output: [{ name: "scores" }] },
    }],
  });
  deepStrictEqual(dropZeroAddends(m.graph!), { adds: 0, nodes: 0 });
  ok(m.graph!.node!.some((n) => n.opType === "ConstantOfShape"));
});
