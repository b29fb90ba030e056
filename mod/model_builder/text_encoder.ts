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
 * `CLIPTextTransformer` (`input_ids.argmax(dim=-1)`).
 *
 * @module
 */

import type { EncodedModel } from "../graph/graph.ts";
import { Layers, OPSET } from "../graph/layers.ts";
import { axisNames, type ExportOptions, type ModelDims } from "./options.ts";
import { Rng } from "../graph/rng.ts";

/** Rows of the token table; ids are taken modulo this. */
export const TOKEN_TABLE_ROWS = 1024;
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
  const row = g.op("Mod", [ids64, g.constI64([TOKEN_TABLE_ROWS], [])]);
  const tokTable = L.weight("token_embedding", [TOKEN_TABLE_ROWS, D], 1);
  const tok = g.op("Gather", [tokTable, row], { axis: { i: 0 } }); // [B,S,D]

  // Position embeddings and 1..S counts, sliced to the runtime sequence length.
  const seqLen = g.op("Shape", [ids], { start: { i: 1 }, end: { i: 2 } });
  const posTable = L.weight("position_embedding", [MAX_POSITIONS, D], 0.5);
  const zero = g.constI64([0]);
  const axis0 = g.constI64([0]);
  const pos = g.op("Slice", [posTable, zero, seqLen, axis0]); // [S,D]
  const countTable = g.init(
    "position_count",
    "float32",
    [MAX_POSITIONS, 1],
    Float32Array.from({ length: MAX_POSITIONS }, (_, i) => i + 1),
  );
  const count = g.op("Slice", [countTable, zero, seqLen, axis0]); // [S,1]
  const h = L.add(tok, pos);

  // Causal context: mean of positions 0..i, then a tanh MLP, added back.
  const ctx = g.op("Div", [g.op("CumSum", [h, g.constI64([1], [])]), count]);
  const mixed = g.op("Tanh", [L.linear(ctx, D, D, 1, "mix", TEXT_ENCODER_SCOPES.mix)]);
  const last = L.add(h, mixed);
  L.floatOut(last, "last_hidden_state", [ax.batch, ax.sequence, D]);

  const eos = g.op("ArgMax", [L.toFloat(ids)], { axis: { i: 1 }, keepdims: { i: 1 } }); // [B,1]
  const pooled = g.op("GatherND", [last, eos], { batch_dims: { i: 1 } }); // [B,D]
  L.floatOut(pooled, "pooler_output", [ax.batch, D]);

  return g.encode({ opset: OPSET, docString: "tiny SD 1.5 text encoder (test fixture)" });
}
