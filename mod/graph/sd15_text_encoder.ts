/**
 * The SD 1.x CLIP text encoder as an ONNX graph (layers in `sd15.ts`):
 *
 * - Text encoder (`CLIPTextModel`): token and position embeddings, pre-norm
 *   layers of causal self-attention and quick-GELU MLP, final LayerNorm;
 *   `pooler_output` at the highest token id (the EOS token).
 *
 * I/O follows the diffusers script
 * (`scripts/convert_stable_diffusion_checkpoint_to_onnx.py`): int32
 * `input_ids` → `last_hidden_state`, `pooler_output`.
 *
 * @module
 */

import { Layers } from "./layers.ts";
import { Blocks, type Sd15Model, type Sd15Weights } from "./sd15.ts";
import { SD15_TEXT_ENCODER, type TextEncoderConfig } from "./sd15_config.ts";

/** Builds the CLIP text encoder (int32 `input_ids`, diffusers script). */
export function buildSd15TextEncoder(
  weights: Sd15Weights,
  config: TextEncoderConfig = SD15_TEXT_ENCODER,
): Sd15Model {
  const cfg = config;
  const L = new Layers("text_encoder", weights, "float32", true);
  const B = new Blocks(L, 1);
  const g = L.g;
  const D = cfg.hiddenSize;
  const P = cfg.maxPositions;
  const ids = L.input("input_ids", "int32", ["batch", "sequence"]);
  const ids64 = g.op("Cast", [ids], { to: { i: 7 } });
  const embedding = (name: string, rows: number) =>
    L.param({ hint: name, name, dims: [rows, D], layout: "same", init: { uniform: 0.02 } });
  const tokTable = embedding("text_model.embeddings.token_embedding.weight", cfg.vocabSize);
  const tok = g.op("Gather", [tokTable, ids64], { axis: { i: 0 } });
  const seqLen = g.op("Shape", [ids], { start: { i: 1 }, end: { i: 2 } });
  const zero = g.constI64([0]);
  const posTable = embedding("text_model.embeddings.position_embedding.weight", P);
  let x = L.add(tok, g.op("Slice", [posTable, zero, seqLen, zero]));
  // Causal mask [S, S]: 0 on and below the diagonal, a large negative above it.
  const mask = new Float32Array(P * P);
  for (let i = 0; i < P; i++) for (let j = i + 1; j < P; j++) mask[i * P + j] = -1e9;
  const maskFull = g.init("causal_mask", "float32", [P, P], mask);
  const axes01 = g.constI64([0, 1]);
  const ends = g.op("Concat", [seqLen, seqLen], { axis: { i: 0 } });
  const causal = g.op("Slice", [maskFull, g.constI64([0, 0]), ends, axes01]);
  for (let l = 0; l < cfg.layers; l++) {
    const s = `text_model/encoder/layers.${l}`;
    const n1 = B.layerNorm(x, D, `${s}/layer_norm1`, cfg.layerNormEps);
    x = L.add(x, causalAttention(B, n1, causal, `${s}/self_attn`, cfg));
    const n2 = B.layerNorm(x, D, `${s}/layer_norm2`, cfg.layerNormEps);
    const f1 = B.linear(n2, D, cfg.intermediateSize, `${s}/mlp/fc1`);
    const quick = L.mul(f1, g.op("Sigmoid", [L.scale(f1, 1.702)]));
    x = L.add(x, B.linear(quick, cfg.intermediateSize, D, `${s}/mlp/fc2`));
  }
  const last = B.layerNorm(x, D, "text_model/final_layer_norm", cfg.layerNormEps);
  L.floatOut(last, "last_hidden_state", ["batch", "sequence", D]);
  // ArgMax on the int32 ids themselves: a float cast would round 49406 and 49407 together in
  // an fp16 model.
  const eos = g.op("ArgMax", [ids], { axis: { i: 1 }, keepdims: { i: 1 } });
  L.floatOut(g.op("GatherND", [last, eos], { batch_dims: { i: 1 } }), "pooler_output", [
    "batch",
    D,
  ]);
  return { graph: g, params: L.params, modules: B.modules };
}

/** CLIP self-attention (q/k/v/out with biases) plus the causal mask. */
function causalAttention(
  B: Blocks,
  x: string,
  mask: string,
  scope: string,
  cfg: TextEncoderConfig,
): string {
  const { L } = B;
  const g = L.g;
  const D = cfg.hiddenSize;
  const heads = cfg.attentionHeads;
  const d = D / heads;
  const split = (t: string, perm: number[]) =>
    g.op("Transpose", [L.reshape(t, [0, 0, heads, d])], { perm: { ints: perm } });
  const q = split(B.linear(x, D, D, `${scope}/q_proj`), [0, 2, 1, 3]);
  const k = split(B.linear(x, D, D, `${scope}/k_proj`), [0, 2, 3, 1]);
  const v = split(B.linear(x, D, D, `${scope}/v_proj`), [0, 2, 1, 3]);
  const scores = L.add(L.scale(g.op("MatMul", [q, k]), 1 / Math.sqrt(d)), mask);
  const o = g.op(
    "Transpose",
    [g.op("MatMul", [g.op("Softmax", [scores], { axis: { i: -1 } }), v])],
    {
      perm: { ints: [0, 2, 1, 3] },
    },
  );
  return B.linear(L.reshape(o, [0, 0, D]), D, D, `${scope}/out_proj`);
}
