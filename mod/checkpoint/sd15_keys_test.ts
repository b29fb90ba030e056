import { deepStrictEqual, strictEqual } from "node:assert";
import {
  emaKey,
  isVaeAttentionProjection,
  normaliseDiffusersVaeName,
  textEncoderToDiffusers,
  unetToDiffusers,
  unetToOriginal,
  vaeToDiffusers,
  vaeToOriginal,
} from "./sd15_keys.ts";
import { testSd15 } from "./testing.ts";

Deno.test("sd15 keys: known SD 1.5 UNet names map both ways", () => {
  // Pairs as diffusers' convert_diffusers_to_original_stable_diffusion.py writes them.
  const pairs: [string, string][] = [
    ["input_blocks.0.0.weight", "conv_in.weight"],
    ["time_embed.2.bias", "time_embedding.linear_2.bias"],
    ["input_blocks.1.0.in_layers.0.weight", "down_blocks.0.resnets.0.norm1.weight"],
    ["input_blocks.1.0.emb_layers.1.weight", "down_blocks.0.resnets.0.time_emb_proj.weight"],
    ["input_blocks.4.0.skip_connection.bias", "down_blocks.1.resnets.0.conv_shortcut.bias"],
    [
      "input_blocks.1.1.transformer_blocks.0.attn1.to_q.weight",
      "down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q.weight",
    ],
    ["input_blocks.3.0.op.weight", "down_blocks.0.downsamplers.0.conv.weight"],
    ["input_blocks.11.0.out_layers.3.weight", "down_blocks.3.resnets.1.conv2.weight"],
    ["middle_block.1.proj_in.weight", "mid_block.attentions.0.proj_in.weight"],
    ["middle_block.2.in_layers.2.bias", "mid_block.resnets.1.conv1.bias"],
    ["output_blocks.2.1.conv.weight", "up_blocks.0.upsamplers.0.conv.weight"],
    ["output_blocks.5.2.conv.bias", "up_blocks.1.upsamplers.0.conv.bias"],
    ["output_blocks.11.1.proj_out.weight", "up_blocks.3.attentions.2.proj_out.weight"],
    ["out.0.weight", "conv_norm_out.weight"],
    ["out.2.bias", "conv_out.bias"],
  ];
  for (const [sd, hf] of pairs) {
    strictEqual(unetToDiffusers(sd), hf, sd);
    strictEqual(unetToOriginal(hf), sd, hf);
  }
  strictEqual(unetToDiffusers("input_blocks.12.0.weight"), undefined);
  strictEqual(unetToDiffusers("label_emb.0.0.weight"), undefined);
});

Deno.test("sd15 keys: known VAE names map both ways (decoder levels reversed)", () => {
  const pairs: [string, string][] = [
    [
      "encoder.down.0.block.1.nin_shortcut.weight",
      "encoder.down_blocks.0.resnets.1.conv_shortcut.weight",
    ],
    ["encoder.down.2.downsample.conv.bias", "encoder.down_blocks.2.downsamplers.0.conv.bias"],
    ["encoder.norm_out.weight", "encoder.conv_norm_out.weight"],
    ["decoder.up.3.block.0.conv1.weight", "decoder.up_blocks.0.resnets.0.conv1.weight"],
    ["decoder.up.1.upsample.conv.weight", "decoder.up_blocks.2.upsamplers.0.conv.weight"],
    ["decoder.mid.block_2.norm2.bias", "decoder.mid_block.resnets.1.norm2.bias"],
    ["decoder.mid.attn_1.q.weight", "decoder.mid_block.attentions.0.to_q.weight"],
    ["encoder.mid.attn_1.proj_out.bias", "encoder.mid_block.attentions.0.to_out.0.bias"],
    ["encoder.mid.attn_1.norm.weight", "encoder.mid_block.attentions.0.group_norm.weight"],
    ["post_quant_conv.weight", "post_quant_conv.weight"],
  ];
  for (const [sd, hf] of pairs) {
    strictEqual(vaeToDiffusers(sd), hf, sd);
    strictEqual(vaeToOriginal(hf), sd, hf);
  }
  strictEqual(
    normaliseDiffusersVaeName("decoder.mid_block.attentions.0.proj_attn.weight"),
    "decoder.mid_block.attentions.0.to_out.0.weight",
  );
  strictEqual(
    vaeToOriginal("encoder.mid_block.attentions.0.query.bias"),
    "encoder.mid.attn_1.q.bias",
  );
  strictEqual(vaeToDiffusers("loss.logvar"), undefined);
});

Deno.test("sd15 keys: every name of a whole SD 1.x set round-trips original <-> diffusers, one to one", () => {
  const m = testSd15();
  for (
    const [map, there, back] of [
      [m.unet, unetToOriginal, unetToDiffusers],
      [m.vae, vaeToOriginal, vaeToDiffusers],
    ] as const
  ) {
    const originals = new Set<string>();
    for (const hf of map.keys()) {
      const sd = there(hf);
      strictEqual(typeof sd, "string", hf);
      strictEqual(back(sd!), hf);
      originals.add(sd!);
    }
    strictEqual(originals.size, map.size);
  }
  // SD 1.5's UNet has 686 tensors, its VAE 248 (diffusers' state dicts).
  strictEqual(m.unet.size, 686);
  strictEqual(m.vae.size, 248);
});

Deno.test("sd15 keys: text encoder names with and without text_model., EMA keys without dots", () => {
  strictEqual(
    textEncoderToDiffusers("text_model.encoder.layers.0.mlp.fc1.weight"),
    "text_model.encoder.layers.0.mlp.fc1.weight",
  );
  strictEqual(
    textEncoderToDiffusers("encoder.layers.11.self_attn.q_proj.bias"),
    "text_model.encoder.layers.11.self_attn.q_proj.bias",
  );
  strictEqual(
    textEncoderToDiffusers("final_layer_norm.weight"),
    "text_model.final_layer_norm.weight",
  );
  strictEqual(textEncoderToDiffusers("logit_scale"), undefined);
  deepStrictEqual(
    emaKey("input_blocks.1.1.proj_in.weight"),
    "model_ema.diffusion_modelinput_blocks11proj_inweight",
  );
});

Deno.test("sd15 keys: every SD 1.5 name maps as diffusers' own conversion script maps it", async () => {
  // testdata/diffusers_names.json: made by testdata/make_diffusers_names.py, which runs diffusers'
  // convert_unet_state_dict / convert_vae_state_dict on every diffusers name of SD 1.5.
  const ref = JSON.parse(
    await Deno.readTextFile(new URL("./testdata/diffusers_names.json", import.meta.url)),
  ) as { unet: [string, string][]; vae: [string, string][]; vae_reshaped_to_conv: string[] };
  const m = testSd15();
  deepStrictEqual(ref.unet.map((p) => p[0]).sort(), [...m.unet.keys()].sort());
  deepStrictEqual(ref.vae.map((p) => p[0]).sort(), [...m.vae.keys()].sort());
  for (const [hf, sd] of ref.unet) {
    strictEqual(unetToOriginal(hf), sd, hf);
    strictEqual(unetToDiffusers(sd), hf, sd);
  }
  for (const [hf, sd] of ref.vae) {
    strictEqual(vaeToOriginal(hf), sd, hf);
    strictEqual(vaeToDiffusers(sd), hf, sd);
  }
  deepStrictEqual(
    ref.vae.filter(([hf]) => isVaeAttentionProjection(hf)).map((p) => p[1]).sort(),
    ref.vae_reshaped_to_conv,
  );
});

Deno.test("sd15 keys: the test model at SD 1.5's widths has SD 1.5's parameter counts", () => {
  // Lazy: only shapes are made. Counts of diffusers' UNet2DConditionModel, AutoencoderKL and
  // transformers' CLIPTextModel for runwayml/stable-diffusion-v1-5.
  const m = testSd15({
    lazy: true,
    unetWidth: 320,
    context: 768,
    vaeWidth: 128,
    textLayers: 12,
    vocab: 49408,
    positions: 77,
  });
  const count = (map: Map<string, { shape: number[] }>) =>
    [...map.values()].reduce((a, t) => a + t.shape.reduce((x, y) => x * y, 1), 0);
  strictEqual(count(m.unet), 859_520_964);
  strictEqual(count(m.vae), 83_653_863);
  strictEqual(count(m.textEncoder), 123_060_480);
});
