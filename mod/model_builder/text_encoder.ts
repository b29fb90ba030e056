/**
 * A tiny CLIP-text-encoder stand-in with the real contract: `input_ids`
 * (int32 for the diffusers script, int64 for Optimum) `[batch, sequence]` →
 * `last_hidden_state [batch, sequence, D]`, `pooler_output [batch, D]`.
 *
 * Token embeddings come from `Mod(input_ids, 1024)` into a 1024×D table, so
 * the whole 49408-token vocabulary works with a small file. Like CLIP it is
 * causal (a running mean over earlier positions) and adds learned position
 * embeddings (77 positions); `pooler_output` is the hidden state at the
 * highest token id, i.e. the EOS token, as in transformers'
 * `CLIPTextTransformer` (`input_ids.argmax(dim=-1)`). Ids from CLIP's
 * vocabulary size on (49408: rows a textual-inversion load appends, as
 * diffusers `load_textual_inversion` does) index the rows after the table's
 * 1024, so appended rows are reached as in the real model.
 *
 * With `textEncoderLayers` it is shaped like CLIP's encoder: that many
 * pre-norm layers, each `x + attn(norm1(x))` (the causal running mean and a
 * tanh linear standing in for attention) then `h + fc2(tanh(fc1(norm2(h))))`,
 * and `final_layer_norm`, named in torch-export scopes
 * (`/text_model/encoder/layers.N/...`). Layer weights are drawn in layer
 * order and the final norm from its own stream, so a model with one layer
 * fewer has the same weights for the layers it has: what a CLIP skip test
 * compares against.
 *
 * @module
 */

import type { EncodedModel } from "../graph/graph.ts";
import { Layers, OPSET } from "../graph/layers.ts";
import { axisNames, type ExportOptions, type ModelDims } from "./options.ts";
import { Rng } from "../graph/rng.ts";

/** Rows of the token table; ids below {@link CLIP_VOCAB_SIZE} are taken modulo this. */
export const TOKEN_TABLE_ROWS = 1024;
/** CLIP's vocabulary size: ids from here on are rows appended to the table. */
export const CLIP_VOCAB_SIZE = 49408;
/** CLIP's maximum sequence length (position table rows). */
export const MAX_POSITIONS = 77;

/**
 * Torch-export scopes given to the text encoder's nodes (CLIP module paths),
 * so kohya `lora_te_…` keys map to them (see mod/lora).
 */
export const TEXT_ENCODER_SCOPES = {
  /** The causal-context MLP: a Linear D→D. */
  mix: "text_model/encoder/layers.0/mlp/fc1",
} as const;

/** Builds the text encoder. */
export function buildTextEncoder(seed: number, dims: ModelDims, o: ExportOptions): EncodedModel {
  const L = new Layers("text_encoder", new Rng(seed, "text_encoder"), o.io);
  const g = L.g;
  const ax = axisNames(o.flavour);
  const D = dims.hiddenSize;
  const idType = o.flavour === "diffusers" ? "int32" : "int64";

  const ids = L.input("input_ids", idType, [ax.batch, ax.sequence]);
  const ids64 = idType === "int64" ? ids : g.op("Cast", [ids], { to: { i: 7 } });
  const rows = g.constI64([TOKEN_TABLE_ROWS], []);
  const vocab = g.constI64([CLIP_VOCAB_SIZE], []);
  const row = g.op("Where", [
    g.op("Less", [ids64, vocab]),
    g.op("Mod", [ids64, rows]),
    g.op("Add", [g.op("Sub", [ids64, vocab]), rows]),
  ]);
  const tokTable = L.weight("token_embedding", [TOKEN_TABLE_ROWS, D], 1);
  const tok = g.op("Gather", [tokTable, row], { axis: { i: 0 } }); // [B,S,D]

  // Position embeddings and 1..S counts, sliced to the runtime sequence length.
  const seqLen = g.op("Shape", [ids], { start: { i: 1 }, end: { i: 2 } });
  const posTable = L.weight("position_embedding", [MAX_POSITIONS, D], 0.5);
  const zero = g.constI64([0]);
  const axis0 = g.constI64([0]);
  // The layered encoder gathers its positions as transformers' CLIPTextEmbeddings exports
  // (`position_embedding(position_ids[:, :seq_length])`): a Gather whose indices take only the
  // ids' length.
  const pos = (o.textEncoderLayers ?? 0) > 0
    ? g.op("Gather", [
      posTable,
      g.op("Range", [g.constI64([0], []), g.op("Squeeze", [seqLen, zero]), g.constI64([1], [])]),
    ], { axis: { i: 0 } })
    : g.op("Slice", [posTable, zero, seqLen, axis0]); // [S,D]
  const countTable = g.init(
    "position_count",
    "float32",
    [MAX_POSITIONS, 1],
    Float32Array.from({ length: MAX_POSITIONS }, (_, i) => i + 1),
  );
  const count = g.op("Slice", [countTable, zero, seqLen, axis0]); // [S,1]
  const h = L.add(tok, pos);

  const causalMean = (x: string) => g.op("Div", [g.op("CumSum", [x, g.constI64([1], [])]), count]);
  let last: string;
  const layers = o.textEncoderLayers ?? 0;
  if (layers === 0) {
    // Causal context: mean of positions 0..i, then a tanh MLP, added back.
    const mixed = g.op("Tanh", [L.linear(causalMean(h), D, D, 1, "mix", TEXT_ENCODER_SCOPES.mix)]);
    last = L.add(h, mixed);
  } else {
    const norm = (x: string, scope: string, gamma: Float32Array, beta: Float32Array) =>
      layerNorm(L, x, scope, gamma, beta, o.textEncoderNorm ?? "op");
    const ones = new Float32Array(D).fill(1);
    const zeros = new Float32Array(D);
    let x = h;
    for (let l = 0; l < layers; l++) {
      const s = `text_model/encoder/layers.${l}`;
      const attn = L.linear(
        causalMean(norm(x, `${s}/layer_norm1`, ones, zeros)),
        D,
        D,
        1,
        `attn${l}`,
        `${s}/self_attn/out_proj`,
      );
      x = L.add(x, g.op("Tanh", [attn]));
      const n2 = norm(x, `${s}/layer_norm2`, ones, zeros);
      const f1 = g.op("Tanh", [
        L.linear(n2, D, D, 1, `fc1_${l}`, l === 0 ? TEXT_ENCODER_SCOPES.mix : `${s}/mlp/fc1`),
      ]);
      x = L.add(x, L.linear(f1, D, D, 1, `fc2_${l}`, `${s}/mlp/fc2`));
    }
    const finalRng = new Rng(seed, "text_encoder/final_layer_norm");
    const gamma = Float32Array.from(finalRng.uniform(D, 0.5), (v) => 1 + v);
    last = norm(x, "text_model/final_layer_norm", gamma, finalRng.uniform(D, 0.5));
  }
  L.floatOut(last, "last_hidden_state", [ax.batch, ax.sequence, D]);

  const eos = g.op("ArgMax", [L.toFloat(ids)], { axis: { i: 1 }, keepdims: { i: 1 } }); // [B,1]
  const pooled = g.op("GatherND", [last, eos], { batch_dims: { i: 1 } }); // [B,D]
  L.floatOut(pooled, "pooler_output", [ax.batch, D]);

  return g.encode({ opset: OPSET, docString: "tiny SD 1.5 text encoder (test fixture)" });
}

/**
 * A layer norm over the last axis (eps 1e-5, CLIP's), as one
 * `LayerNormalization` node or decomposed the way torch exports it at
 * opsets below 17: `(x − mean) / sqrt(mean((x − mean)²) + eps) · γ + β`.
 */
function layerNorm(
  L: Layers,
  x: string,
  scope: string,
  gamma: Float32Array,
  beta: Float32Array,
  form: "op" | "decomposed",
): string {
  const g = L.g;
  const D = gamma.length;
  const w = g.init(`${scope}.weight`, "float32", [D], gamma);
  const b = g.init(`${scope}.bias`, "float32", [D], beta);
  if (form === "op") {
    return g.op(
      "LayerNormalization",
      [x, w, b],
      { axis: { i: -1 }, epsilon: { f: 1e-5 } },
      undefined,
      `/${scope}/LayerNormalization`,
    );
  }
  const mean = L.reduce("ReduceMean", x, [-1], true);
  const centred = g.op("Sub", [x, mean]);
  const variance = L.reduce("ReduceMean", g.op("Pow", [centred, g.constF([2], [])]), [-1], true);
  const std = g.op("Sqrt", [L.shift(variance, 1e-5)]);
  return L.add(L.mul(g.op("Div", [centred, std]), w), b);
}
