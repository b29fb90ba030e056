/**
 * SD 1.x key maps between the original CompVis/LDM single-file layout and
 * diffusers' state-dict names, both directions. The tables restate
 * huggingface/diffusers `scripts/convert_diffusers_to_original_stable_diffusion.py`
 * (`unet_conversion_map`, `unet_conversion_map_resnet`,
 * `unet_conversion_map_layer`, `vae_conversion_map`, `vae_conversion_map_attn`,
 * `reshape_weight_for_sd`) and `src/diffusers/pipelines/stable_diffusion/convert_from_ckpt.py`
 * (`convert_ldm_unet_checkpoint` with `extract_ema`, `convert_ldm_vae_checkpoint`,
 * `convert_ldm_clip_checkpoint`).
 *
 * Names here are relative to a part: a UNet name has no `model.diffusion_model.`,
 * a VAE name no `first_stage_model.`, a text-encoder name no
 * `cond_stage_model.transformer.` (see {@link SD15_PREFIXES}).
 *
 * @module
 */

/** Where each part lives in an original-layout single file. */
export const SD15_PREFIXES = {
  unet: "model.diffusion_model.",
  vae: "first_stage_model.",
  textEncoder: "cond_stage_model.transformer.",
  /** EMA copies: `model_ema.` + the name after `model.` with its dots removed. */
  ema: "model_ema.",
} as const;

/** The EMA key of an original UNet name (relative to `model.diffusion_model.`), as LDM's `LitEma` stores it. */
export function emaKey(unetName: string): string {
  return SD15_PREFIXES.ema + ("diffusion_model." + unetName).replaceAll(".", "");
}

// ---- UNet ----

/** Whole names that differ (original, diffusers). */
const UNET_TOP: readonly (readonly [string, string])[] = [
  ["time_embed.0.weight", "time_embedding.linear_1.weight"],
  ["time_embed.0.bias", "time_embedding.linear_1.bias"],
  ["time_embed.2.weight", "time_embedding.linear_2.weight"],
  ["time_embed.2.bias", "time_embedding.linear_2.bias"],
  ["input_blocks.0.0.weight", "conv_in.weight"],
  ["input_blocks.0.0.bias", "conv_in.bias"],
  ["out.0.weight", "conv_norm_out.weight"],
  ["out.0.bias", "conv_norm_out.bias"],
  ["out.2.weight", "conv_out.weight"],
  ["out.2.bias", "conv_out.bias"],
];

/** ResNet module names inside a block (original, diffusers). */
const UNET_RESNET: readonly (readonly [string, string])[] = [
  ["in_layers.0.", "norm1."],
  ["in_layers.2.", "conv1."],
  ["out_layers.0.", "norm2."],
  ["out_layers.3.", "conv2."],
  ["emb_layers.1.", "time_emb_proj."],
  ["skip_connection.", "conv_shortcut."],
];

/**
 * Block prefixes (original, diffusers) of SD 1.x's UNet: 4 levels, 2 ResNets
 * per down level (attention in the first 3), 3 per up level (attention in
 * the last 3), a down-sampler after each down level but the last, an
 * up-sampler after each up level but the last.
 */
const UNET_LAYERS: readonly (readonly [string, string])[] = (() => {
  const out: [string, string][] = [];
  for (let i = 0; i < 4; i++) {
    for (let j = 0; j < 2; j++) {
      out.push([`input_blocks.${3 * i + j + 1}.0.`, `down_blocks.${i}.resnets.${j}.`]);
      if (i < 3) {
        out.push([`input_blocks.${3 * i + j + 1}.1.`, `down_blocks.${i}.attentions.${j}.`]);
      }
    }
    for (let j = 0; j < 3; j++) {
      out.push([`output_blocks.${3 * i + j}.0.`, `up_blocks.${i}.resnets.${j}.`]);
      if (i > 0) out.push([`output_blocks.${3 * i + j}.1.`, `up_blocks.${i}.attentions.${j}.`]);
    }
    if (i < 3) {
      out.push([`input_blocks.${3 * (i + 1)}.0.op.`, `down_blocks.${i}.downsamplers.0.conv.`]);
      out.push([`output_blocks.${3 * i + 2}.${i === 0 ? 1 : 2}.`, `up_blocks.${i}.upsamplers.0.`]);
    }
  }
  out.push(["middle_block.1.", "mid_block.attentions.0."]);
  for (let j = 0; j < 2; j++) out.push([`middle_block.${2 * j}.`, `mid_block.resnets.${j}.`]);
  return out;
})();

function mapPrefix(
  name: string,
  table: readonly (readonly [string, string])[],
  from: 0 | 1,
): string | undefined {
  for (const row of table) {
    if (name.startsWith(row[from])) return row[1 - from] + name.slice(row[from].length);
  }
  return undefined;
}

/**
 * The diffusers `UNet2DConditionModel` name of an original UNet name, or
 * undefined for a name outside SD 1.x's UNet.
 */
export function unetToDiffusers(original: string): string | undefined {
  for (const [sd, hf] of UNET_TOP) if (original === sd) return hf;
  for (const [sd, hf] of UNET_LAYERS) {
    if (!original.startsWith(sd)) continue;
    const rest = original.slice(sd.length);
    if (hf.includes(".resnets.")) {
      const inner = mapPrefix(rest, UNET_RESNET, 0);
      return inner === undefined ? undefined : hf + inner;
    }
    return hf + rest;
  }
  return undefined;
}

/** The original name of a diffusers UNet name, or undefined for a name outside SD 1.x's UNet. */
export function unetToOriginal(diffusers: string): string | undefined {
  for (const [sd, hf] of UNET_TOP) if (diffusers === hf) return sd;
  for (const [sd, hf] of UNET_LAYERS) {
    if (!diffusers.startsWith(hf)) continue;
    const rest = diffusers.slice(hf.length);
    if (hf.includes(".resnets.")) {
      const inner = mapPrefix(rest, UNET_RESNET, 1);
      return inner === undefined ? undefined : sd + inner;
    }
    return sd + rest;
  }
  return undefined;
}

// ---- VAE ----

/** Mid-block attention modules (original, diffusers); the original stores 1×1 convs, diffusers Linear. */
const VAE_ATTN: readonly (readonly [string, string])[] = [
  ["norm.", "group_norm."],
  ["q.", "to_q."],
  ["k.", "to_k."],
  ["v.", "to_v."],
  ["proj_out.", "to_out.0."],
];

/** Older diffusers names of the VAE mid-block attention (before `Attention` replaced `AttentionBlock`). */
const VAE_ATTN_OLD_DIFFUSERS: readonly (readonly [string, string])[] = [
  ["query.", "to_q."],
  ["key.", "to_k."],
  ["value.", "to_v."],
  ["proj_attn.", "to_out.0."],
];

/** Whether a diffusers VAE name is a mid-block attention projection stored as `[C, C, 1, 1]` in the original. */
export function isVaeAttentionProjection(diffusers: string): boolean {
  return /^(encoder|decoder)\.mid_block\.attentions\.0\.(to_q|to_k|to_v|to_out\.0)\.weight$/.test(
    diffusers,
  );
}

/** ResNet module renames of the VAE (original, diffusers). */
function vaeResnet(rest: string, from: 0 | 1): string {
  const [a, b] = from === 0
    ? ["nin_shortcut.", "conv_shortcut."]
    : ["conv_shortcut.", "nin_shortcut."];
  return rest.startsWith(a) ? b + rest.slice(a.length) : rest;
}

/**
 * The diffusers `AutoencoderKL` name of an original VAE name, or undefined
 * for a name outside the VAE. `levels` is the number of resolution levels
 * (4 in SD 1.x; the decoder's `up` blocks are numbered in reverse).
 */
export function vaeToDiffusers(original: string, levels = 4): string | undefined {
  if (/^(post_)?quant_conv\.(weight|bias)$/.test(original)) return original;
  const m = /^(encoder|decoder)\.(.+)$/.exec(original);
  if (!m) return undefined;
  const [, side, rest] = m;
  let r: RegExpExecArray | null;
  if (/^(conv_in|conv_out)\./.test(rest)) return original;
  if (rest.startsWith("norm_out.")) return `${side}.conv_norm_out.${rest.slice(9)}`;
  if ((r = /^mid\.block_([12])\.(.+)$/.exec(rest))) {
    return `${side}.mid_block.resnets.${Number(r[1]) - 1}.${vaeResnet(r[2], 0)}`;
  }
  if ((r = /^mid\.attn_1\.(.+)$/.exec(rest))) {
    const inner = mapPrefix(r[1], VAE_ATTN, 0);
    return inner === undefined ? undefined : `${side}.mid_block.attentions.0.${inner}`;
  }
  if (side === "encoder" && (r = /^down\.(\d+)\.block\.(\d+)\.(.+)$/.exec(rest))) {
    return `encoder.down_blocks.${r[1]}.resnets.${r[2]}.${vaeResnet(r[3], 0)}`;
  }
  if (side === "encoder" && (r = /^down\.(\d+)\.downsample\.(.+)$/.exec(rest))) {
    return `encoder.down_blocks.${r[1]}.downsamplers.0.${r[2]}`;
  }
  if (side === "decoder" && (r = /^up\.(\d+)\.block\.(\d+)\.(.+)$/.exec(rest))) {
    return `decoder.up_blocks.${levels - 1 - Number(r[1])}.resnets.${r[2]}.${vaeResnet(r[3], 0)}`;
  }
  if (side === "decoder" && (r = /^up\.(\d+)\.upsample\.(.+)$/.exec(rest))) {
    return `decoder.up_blocks.${levels - 1 - Number(r[1])}.upsamplers.0.${r[2]}`;
  }
  return undefined;
}

/** The original name of a diffusers VAE name (current or older attention names), or undefined. */
export function vaeToOriginal(diffusers: string, levels = 4): string | undefined {
  const name = normaliseDiffusersVaeName(diffusers);
  if (/^(post_)?quant_conv\.(weight|bias)$/.test(name)) return name;
  const m = /^(encoder|decoder)\.(.+)$/.exec(name);
  if (!m) return undefined;
  const [, side, rest] = m;
  let r: RegExpExecArray | null;
  if (/^(conv_in|conv_out)\./.test(rest)) return name;
  if (rest.startsWith("conv_norm_out.")) return `${side}.norm_out.${rest.slice(14)}`;
  if ((r = /^mid_block\.resnets\.([01])\.(.+)$/.exec(rest))) {
    return `${side}.mid.block_${Number(r[1]) + 1}.${vaeResnet(r[2], 1)}`;
  }
  if ((r = /^mid_block\.attentions\.0\.(.+)$/.exec(rest))) {
    const inner = mapPrefix(r[1], VAE_ATTN, 1);
    return inner === undefined ? undefined : `${side}.mid.attn_1.${inner}`;
  }
  if (side === "encoder" && (r = /^down_blocks\.(\d+)\.resnets\.(\d+)\.(.+)$/.exec(rest))) {
    return `encoder.down.${r[1]}.block.${r[2]}.${vaeResnet(r[3], 1)}`;
  }
  if (side === "encoder" && (r = /^down_blocks\.(\d+)\.downsamplers\.0\.(.+)$/.exec(rest))) {
    return `encoder.down.${r[1]}.downsample.${r[2]}`;
  }
  if (side === "decoder" && (r = /^up_blocks\.(\d+)\.resnets\.(\d+)\.(.+)$/.exec(rest))) {
    return `decoder.up.${levels - 1 - Number(r[1])}.block.${r[2]}.${vaeResnet(r[3], 1)}`;
  }
  if (side === "decoder" && (r = /^up_blocks\.(\d+)\.upsamplers\.0\.(.+)$/.exec(rest))) {
    return `decoder.up.${levels - 1 - Number(r[1])}.upsample.${r[2]}`;
  }
  return undefined;
}

/** A diffusers VAE name with the older mid-block attention names (`query`, `key`, `value`, `proj_attn`) made current. */
export function normaliseDiffusersVaeName(name: string): string {
  const m = /^((?:encoder|decoder)\.mid_block\.attentions\.0\.)(.+)$/.exec(name);
  if (!m) return name;
  return m[1] + (mapPrefix(m[2], VAE_ATTN_OLD_DIFFUSERS, 0) ?? m[2]);
}

/** Resolution levels of an original-layout VAE: the decoder's `up.N` blocks counted (4 when there are none). */
export function originalVaeLevels(names: Iterable<string>): number {
  let max = -1;
  for (const n of names) {
    const m = /^decoder\.up\.(\d+)\./.exec(n);
    if (m) max = Math.max(max, Number(m[1]));
  }
  return max < 0 ? 4 : max + 1;
}

/** Resolution levels of a diffusers VAE: its `decoder.up_blocks.N` counted (4 when there are none). */
export function diffusersVaeLevels(names: Iterable<string>): number {
  let max = -1;
  for (const n of names) {
    const m = /^decoder\.up_blocks\.(\d+)\./.exec(n);
    if (m) max = Math.max(max, Number(m[1]));
  }
  return max < 0 ? 4 : max + 1;
}

// ---- Text encoder ----

/**
 * The transformers `CLIPTextModel` name of a text-encoder name after
 * `cond_stage_model.transformer.`: files saved with newer transformers
 * versions carry `text_model.`, older ones do not (AUTOMATIC1111 `modules/sd_models.py`
 * `checkpoint_dict_replacements_sd1` adds it the same way). Undefined for
 * other names.
 */
export function textEncoderToDiffusers(original: string): string | undefined {
  if (original.startsWith("text_model.")) return original;
  if (/^(embeddings|encoder|final_layer_norm)\./.test(original)) return "text_model." + original;
  return undefined;
}
