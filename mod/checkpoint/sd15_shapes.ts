/**
 * Every tensor name and shape of an SD 1.x model under diffusers' names,
 * from its widths: diffusers `UNet2DConditionModel` with SD 1.x's config
 * (block widths ×1, ×2, ×4, ×4; 2 layers per block; cross-attention in the
 * first three down and last three up blocks; 1×1-conv projections),
 * `AutoencoderKL` (4 levels, ×1, ×2, ×4, ×4; single-head mid-block attention),
 * transformers `CLIPTextModel`. At SD 1.5's widths the counts are SD 1.5's:
 * 859,520,964 UNet, 83,653,863 VAE and 123,060,480 text-encoder parameters.
 * Reading checks a checkpoint against it, so nothing downstream meets a
 * missing or misshapen weight.
 *
 * @module
 */

/** The widths that fix an SD 1.x model's shapes. */
export interface Sd15Widths {
  /** UNet base width (320 in SD 1.x). */
  unetWidth: number;
  /** UNet input channels (4). */
  inChannels: number;
  /** Cross-attention context = text-encoder width (768). */
  context: number;
  /** VAE base width (128). */
  vaeWidth: number;
  /** Text-encoder layers (12). */
  textLayers: number;
  /** Token embedding rows (49408). */
  vocab: number;
  /** Position embedding rows (77). */
  positions: number;
}

/** SD 1.5's widths. */
export const SD15_WIDTHS: Readonly<Sd15Widths> = {
  unetWidth: 320,
  inChannels: 4,
  context: 768,
  vaeWidth: 128,
  textLayers: 12,
  vocab: 49408,
  positions: 77,
};

/** Shapes by diffusers name, per part. */
export interface Sd15Shapes {
  /** UNet2DConditionModel. */
  unet: Map<string, number[]>;
  /** AutoencoderKL. */
  vae: Map<string, number[]>;
  /** CLIPTextModel (without the `position_ids` buffer). */
  textEncoder: Map<string, number[]>;
}

type Add = (name: string, shape: number[]) => void;

const norm = (add: Add, p: string, c: number) => {
  add(`${p}.weight`, [c]);
  add(`${p}.bias`, [c]);
};
const conv = (add: Add, p: string, cout: number, cin: number, k: number) => {
  add(`${p}.weight`, [cout, cin, k, k]);
  add(`${p}.bias`, [cout]);
};
const linear = (add: Add, p: string, cout: number, cin: number, bias = true) => {
  add(`${p}.weight`, [cout, cin]);
  if (bias) add(`${p}.bias`, [cout]);
};

/** diffusers `ResnetBlock2D`; `temb` 0 for the VAE's (no time projection). */
function resnet(add: Add, p: string, cin: number, cout: number, temb: number): void {
  norm(add, `${p}.norm1`, cin);
  conv(add, `${p}.conv1`, cout, cin, 3);
  if (temb > 0) linear(add, `${p}.time_emb_proj`, cout, temb);
  norm(add, `${p}.norm2`, cout);
  conv(add, `${p}.conv2`, cout, cout, 3);
  if (cin !== cout) conv(add, `${p}.conv_shortcut`, cout, cin, 1);
}

/** diffusers `Transformer2DModel` as SD 1.x has it: 1×1-conv projections, one block, GEGLU. */
function transformer(add: Add, p: string, c: number, ctx: number): void {
  norm(add, `${p}.norm`, c);
  conv(add, `${p}.proj_in`, c, c, 1);
  const b = `${p}.transformer_blocks.0`;
  for (const [attn, kv] of [["attn1", c], ["attn2", ctx]] as const) {
    linear(add, `${b}.${attn}.to_q`, c, c, false);
    linear(add, `${b}.${attn}.to_k`, c, kv, false);
    linear(add, `${b}.${attn}.to_v`, c, kv, false);
    linear(add, `${b}.${attn}.to_out.0`, c, c);
  }
  norm(add, `${b}.norm1`, c);
  norm(add, `${b}.norm2`, c);
  norm(add, `${b}.norm3`, c);
  linear(add, `${b}.ff.net.0.proj`, 8 * c, c);
  linear(add, `${b}.ff.net.2`, c, 4 * c);
  conv(add, `${p}.proj_out`, c, c, 1);
}

/** The names and shapes of an SD 1.x model of these widths, in diffusers' module order. */
export function sd15Shapes(widths: Sd15Widths): Sd15Shapes {
  const unet = new Map<string, number[]>();
  const vae = new Map<string, number[]>();
  const textEncoder = new Map<string, number[]>();
  let add: Add = (n, s) => unet.set(n, s);

  const w = widths.unetWidth;
  const ctx = widths.context;
  const ch = [w, 2 * w, 4 * w, 4 * w];
  const temb = 4 * w;
  conv(add, "conv_in", w, widths.inChannels, 3);
  linear(add, "time_embedding.linear_1", temb, w);
  linear(add, "time_embedding.linear_2", temb, temb);
  const skips = [w];
  let c = w;
  for (let i = 0; i < 4; i++) {
    for (let j = 0; j < 2; j++) {
      resnet(add, `down_blocks.${i}.resnets.${j}`, c, ch[i], temb);
      c = ch[i];
      if (i < 3) transformer(add, `down_blocks.${i}.attentions.${j}`, c, ctx);
      skips.push(c);
    }
    if (i < 3) {
      conv(add, `down_blocks.${i}.downsamplers.0.conv`, c, c, 3);
      skips.push(c);
    }
  }
  resnet(add, "mid_block.resnets.0", c, c, temb);
  transformer(add, "mid_block.attentions.0", c, ctx);
  resnet(add, "mid_block.resnets.1", c, c, temb);
  const up = [...ch].reverse();
  for (let i = 0; i < 4; i++) {
    for (let j = 0; j < 3; j++) {
      // Up-block ResNets take the skip connection concatenated to their input.
      resnet(add, `up_blocks.${i}.resnets.${j}`, c + skips.pop()!, up[i], temb);
      c = up[i];
      if (i > 0) transformer(add, `up_blocks.${i}.attentions.${j}`, c, ctx);
    }
    if (i < 3) conv(add, `up_blocks.${i}.upsamplers.0.conv`, c, c, 3);
  }
  norm(add, "conv_norm_out", c);
  conv(add, "conv_out", 4, c, 3);

  add = (n, s) => vae.set(n, s);
  const v = widths.vaeWidth;
  const vch = [v, 2 * v, 4 * v, 4 * v];
  conv(add, "encoder.conv_in", v, 3, 3);
  c = v;
  for (let i = 0; i < 4; i++) {
    for (let j = 0; j < 2; j++) {
      resnet(add, `encoder.down_blocks.${i}.resnets.${j}`, c, vch[i], 0);
      c = vch[i];
    }
    if (i < 3) conv(add, `encoder.down_blocks.${i}.downsamplers.0.conv`, c, c, 3);
  }
  for (const side of ["encoder", "decoder"]) {
    if (side === "decoder") conv(add, "decoder.conv_in", c, 4, 3);
    resnet(add, `${side}.mid_block.resnets.0`, c, c, 0);
    norm(add, `${side}.mid_block.attentions.0.group_norm`, c);
    for (const m of ["to_q", "to_k", "to_v", "to_out.0"]) {
      linear(add, `${side}.mid_block.attentions.0.${m}`, c, c);
    }
    resnet(add, `${side}.mid_block.resnets.1`, c, c, 0);
    if (side === "encoder") {
      norm(add, "encoder.conv_norm_out", c);
      conv(add, "encoder.conv_out", 8, c, 3);
      conv(add, "quant_conv", 8, 8, 1);
      conv(add, "post_quant_conv", 4, 4, 1);
    }
  }
  const vup = [...vch].reverse();
  for (let i = 0; i < 4; i++) {
    for (let j = 0; j < 3; j++) {
      resnet(add, `decoder.up_blocks.${i}.resnets.${j}`, c, vup[i], 0);
      c = vup[i];
    }
    if (i < 3) conv(add, `decoder.up_blocks.${i}.upsamplers.0.conv`, c, c, 3);
  }
  norm(add, "decoder.conv_norm_out", c);
  conv(add, "decoder.conv_out", 3, c, 3);

  add = (n, s) => textEncoder.set(n, s);
  const d = widths.context;
  add("text_model.embeddings.token_embedding.weight", [widths.vocab, d]);
  add("text_model.embeddings.position_embedding.weight", [widths.positions, d]);
  for (let l = 0; l < widths.textLayers; l++) {
    const p = `text_model.encoder.layers.${l}`;
    for (const m of ["q_proj", "k_proj", "v_proj", "out_proj"]) {
      linear(add, `${p}.self_attn.${m}`, d, d);
    }
    norm(add, `${p}.layer_norm1`, d);
    linear(add, `${p}.mlp.fc1`, 4 * d, d);
    linear(add, `${p}.mlp.fc2`, d, 4 * d);
    norm(add, `${p}.layer_norm2`, d);
  }
  norm(add, "text_model.final_layer_norm", d);
  return { unet, vae, textEncoder };
}

/** A part's weights as reading sees them: names and shapes. */
export type ShapeMap = ReadonlyMap<string, { readonly shape: readonly number[] }>;

/**
 * The widths of an SD 1.x model, read from the shapes its weights have
 * (conv_in, the first cross-attention's keys, the VAE's conv_in, the text
 * encoder's embeddings and layer count). Undefined for a width whose weight
 * is missing (a missing part is refused before this is asked).
 */
export function inferSd15Widths(
  parts: { unet?: ShapeMap; vae?: ShapeMap; textEncoder?: ShapeMap },
): Partial<Sd15Widths> {
  const dim = (m: ShapeMap | undefined, name: string, i: number) => m?.get(name)?.shape[i];
  let layers = 0;
  for (const n of parts.textEncoder?.keys() ?? []) {
    const m = /^text_model\.encoder\.layers\.(\d+)\./.exec(n);
    if (m) layers = Math.max(layers, Number(m[1]) + 1);
  }
  return {
    unetWidth: dim(parts.unet, "conv_in.weight", 0),
    inChannels: dim(parts.unet, "conv_in.weight", 1),
    context:
      dim(parts.unet, "down_blocks.0.attentions.0.transformer_blocks.0.attn2.to_k.weight", 1) ??
        dim(parts.textEncoder, "text_model.embeddings.token_embedding.weight", 1),
    vaeWidth: dim(parts.vae, "encoder.conv_in.weight", 0),
    textLayers: parts.textEncoder ? layers : undefined,
    vocab: dim(parts.textEncoder, "text_model.embeddings.token_embedding.weight", 0),
    positions: dim(parts.textEncoder, "text_model.embeddings.position_embedding.weight", 0),
  };
}

/**
 * How `got` differs from the `expected` names and shapes: the first missing
 * name, the first unexpected one, the first shape that differs; undefined
 * when they agree.
 */
export function shapeMismatch(
  got: ShapeMap,
  expected: ReadonlyMap<string, readonly number[]>,
): string | undefined {
  const missing = [...expected.keys()].filter((k) => !got.has(k));
  if (missing.length > 0) {
    return `${missing.length} weight${missing.length > 1 ? "s" : ""} missing (first: ${
      missing[0]
    })`;
  }
  const extra = [...got.keys()].filter((k) => !expected.has(k));
  if (extra.length > 0) {
    return `${extra.length} weight${extra.length > 1 ? "s" : ""} SD 1.x does not have (first: ${
      extra[0]
    })`;
  }
  for (const [name, shape] of expected) {
    const g = got.get(name)!.shape;
    if (g.length !== shape.length || g.some((d, i) => d !== shape[i])) {
      return `${name} is [${g}] where SD 1.x has [${shape}]`;
    }
  }
  return undefined;
}
