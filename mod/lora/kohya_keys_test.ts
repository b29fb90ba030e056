import { deepStrictEqual, strictEqual, throws } from "node:assert";
import { fixNodeName, kohyaModules } from "./kohya_keys.ts";
import type { FloatTensor } from "./safetensors.ts";

const t = (shape: number[], values: number[]): FloatTensor => ({
  shape,
  data: Float32Array.from(values),
});

Deno.test("fixNodeName: torch-export scopes become kohya module paths (onnx-web's fix_node_name)", () => {
  strictEqual(
    fixNodeName("/down_blocks.0/attentions.0/transformer_blocks.0/attn1/to_q/MatMul"),
    "down_blocks_0_attentions_0_transformer_blocks_0_attn1_to_q_MatMul",
  );
  strictEqual(fixNodeName("/conv_in/Conv"), "conv_in_Conv");
  strictEqual(
    fixNodeName("/text_model/encoder/layers.11/self_attn/q_proj/MatMul"),
    "text_model_encoder_layers_11_self_attn_q_proj_MatMul",
  );
  strictEqual(fixNodeName("n3_MatMul"), "n3_MatMul");
});

Deno.test("kohyaModules: groups down/up/alpha per module, alpha defaults to the rank", () => {
  const tensors = new Map<string, FloatTensor>([
    ["lora_unet_conv_in.lora_down.weight", t([2, 1, 1, 1], [1, 2])],
    ["lora_unet_conv_in.lora_up.weight", t([3, 2, 1, 1], [1, 2, 3, 4, 5, 6])],
    ["lora_unet_conv_in.alpha", t([], [4])],
    ["lora_te_text_model_encoder_layers_0_mlp_fc1.lora_down.weight", t([1, 2], [1, 1])],
    ["lora_te_text_model_encoder_layers_0_mlp_fc1.lora_up.weight", t([2, 1], [1, 1])],
    ["unet.conv_in.lora_A.weight", t([1], [0])],
    ["lora_unet_conv_in.something_else", t([1], [0])],
  ]);
  const { modules, unknownKeys } = kohyaModules(tensors, "f.safetensors");
  deepStrictEqual(
    modules.map((m) => [m.key, m.target, m.base, m.alpha]),
    [
      ["lora_unet_conv_in", "unet", "conv_in", 4],
      [
        "lora_te_text_model_encoder_layers_0_mlp_fc1",
        "text_encoder",
        "text_model_encoder_layers_0_mlp_fc1",
        1,
      ],
    ],
  );
  deepStrictEqual(unknownKeys, ["unet.conv_in.lora_A.weight", "lora_unet_conv_in.something_else"]);
});

Deno.test("kohyaModules: refuses half modules, bad shapes and LyCORIS factors, naming file and key", () => {
  const one = (entries: [string, FloatTensor][]) => () =>
    kohyaModules(new Map(entries), "/m/lora/x.safetensors");
  throws(one([["lora_unet_a.lora_down.weight", t([1, 2], [1, 1])]]), {
    message: '/m/lora/x.safetensors: module "lora_unet_a" has no lora_up.weight tensor',
  });
  throws(
    one([
      ["lora_unet_a.lora_down.weight", t([2, 2], [1, 1, 1, 1])],
      ["lora_unet_a.lora_up.weight", t([2, 1], [1, 1])],
    ]),
    /module "lora_unet_a" has lora_down \[2,2\] and lora_up \[2,1\]/,
  );
  throws(one([["lora_unet_a.hada_w1_a", t([1], [1])]]), /"lora_unet_a.hada_w1_a" is a LyCORIS/);
});
