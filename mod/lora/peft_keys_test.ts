/**
 * The diffusers/PEFT key layout: parsed into the same modules as kohya keys,
 * and blended into the tiny UNet and text encoder with real ONNX Runtime
 * sessions exactly as the kohya file with the same factors is.
 */
import { deepStrictEqual, notDeepStrictEqual, ok, throws } from "node:assert";
import { join } from "node:path";
import { buildTinyLora } from "../../tests/fixtures/builder/mod.ts";
import { createSession, type Feeds, type Session, Tensor } from "../onnx/mod.ts";
import { tinyModels } from "../pipeline/_testing.ts";
import { loraModules } from "./lora_layout.ts";
import { LoraSet } from "./lora_set.ts";
import { peftModules } from "./peft_keys.ts";
import { type FloatTensor, parseSafetensors } from "./safetensors.ts";

const t = (shape: number[], values: number[]): FloatTensor => ({
  shape,
  data: Float32Array.from(values),
});

Deno.test("peftModules: lora_A/lora_B and lora.down/lora.up per module, alpha = rank unless given", () => {
  const tensors = new Map<string, FloatTensor>([
    ["unet.down_blocks.0.attentions.0.proj_in.lora_A.weight", t([2, 3, 1, 1], [1, 2, 3, 4, 5, 6])],
    ["unet.down_blocks.0.attentions.0.proj_in.lora_B.weight", t([3, 2, 1, 1], [1, 2, 3, 4, 5, 6])],
    ["text_encoder.text_model.encoder.layers.0.mlp.fc1.lora.down.weight", t([1, 2], [1, 1])],
    ["text_encoder.text_model.encoder.layers.0.mlp.fc1.lora.up.weight", t([2, 1], [1, 1])],
    ["text_encoder.text_model.encoder.layers.0.mlp.fc1.alpha", t([], [8])],
    ["base_model.model.conv_in.lora_A.weight", t([1, 4, 3, 3], new Array(36).fill(0))],
    ["base_model.model.conv_in.lora_B.weight", t([2, 1, 1, 1], [1, 1])],
    ["something.else", t([1], [0])],
  ]);
  const { modules, unknownKeys } = peftModules(tensors, "f.safetensors");
  deepStrictEqual(modules.map((m) => [m.key, m.target, m.base, m.alpha]), [
    [
      "unet.down_blocks.0.attentions.0.proj_in",
      "unet",
      "down_blocks_0_attentions_0_proj_in",
      2,
    ],
    [
      "text_encoder.text_model.encoder.layers.0.mlp.fc1",
      "text_encoder",
      "text_model_encoder_layers_0_mlp_fc1",
      8,
    ],
    ["base_model.model.conv_in", "unet", "conv_in", 1],
  ]);
  deepStrictEqual(unknownKeys, ["something.else"]);
  throws(
    () => peftModules(new Map([["unet.conv_in.lora_A.weight", t([1, 2], [1, 1])]]), "g"),
    { message: 'g: module "unet.conv_in" has no lora_B (up) weight' },
  );
  throws(
    () =>
      peftModules(
        new Map([
          ["unet.conv_in.lora_A.weight", t([2, 3], [1, 1, 1, 1, 1, 1])],
          ["unet.conv_in.lora_B.weight", t([3, 1], [1, 1, 1])],
        ]),
        "h",
      ),
    /h: module "unet.conv_in" has lora_A \[2,3\] and lora_B \[3,1\]/,
  );
});

Deno.test("loraModules: kohya and PEFT keys in one file are both read; the rest stays unknown", () => {
  const tensors = new Map<string, FloatTensor>([
    ["lora_unet_conv_in.lora_down.weight", t([1, 2], [1, 1])],
    ["lora_unet_conv_in.lora_up.weight", t([2, 1], [1, 1])],
    ["unet.conv_out.lora_A.weight", t([1, 2], [1, 1])],
    ["unet.conv_out.lora_B.weight", t([2, 1], [1, 1])],
    ["mystery", t([1], [0])],
  ]);
  const { modules, unknownKeys } = loraModules(tensors, "m");
  deepStrictEqual(modules.map((m) => m.base), ["conv_in", "conv_out"]);
  deepStrictEqual(unknownKeys, ["mystery"]);
});

const root = await tinyModels("peft");
const unetPath = join(root, "sd15", "unet", "model.onnx");
const tePath = join(root, "sd15", "text_encoder", "model.onnx");
const SESSION = { intraOpThreads: 1, interOpThreads: 1 } as const;

function feeds(): { unet: Feeds; te: Feeds } {
  const sample = Float32Array.from({ length: 4 * 8 * 8 }, (_, i) => Math.sin(i * 0.3));
  const ehs = Float32Array.from({ length: 77 * 32 }, (_, i) => Math.cos(i / 5));
  const ids = Int32Array.from(
    { length: 77 },
    (_, i) => (i === 0 ? 49406 : i < 5 ? 320 + i : 49407),
  );
  return {
    unet: {
      sample: new Tensor("float32", sample, [1, 4, 8, 8]),
      timestep: new Tensor("float32", Float32Array.of(500), [1]),
      encoder_hidden_states: new Tensor("float32", ehs, [1, 77, 32]),
    },
    te: { input_ids: new Tensor("int32", ids, [1, 77]) },
  };
}

async function out(session: Session, f: Feeds, name: string): Promise<Float32Array> {
  try {
    return Float32Array.from((await session.run(f))[name].data as Float32Array);
  } finally {
    await session.release();
  }
}

Deno.test("a PEFT-layout LoRA blends exactly like the kohya file with the same factors", async () => {
  const dir = await Deno.makeTempDir({ prefix: "peft_lora_" });
  try {
    const peftBytes = buildTinyLora(21, { layout: "peft", alpha: null });
    const kohyaBytes = buildTinyLora(21, { alpha: null });
    const names = [...parseSafetensors(peftBytes, "peft").keys()];
    ok(names.includes("unet.down_blocks.0.resnets.0.conv1.lora_A.weight"), names.join(", "));
    ok(names.every((n) => !n.startsWith("lora_")), "no kohya key in the PEFT file");
    await Deno.writeFile(join(dir, "peft.safetensors"), peftBytes);
    await Deno.writeFile(join(dir, "kohya.safetensors"), kohyaBytes);

    const plain = await out(await createSession(unetPath, SESSION), feeds().unet, "out_sample");
    const results: Record<string, { unet: Float32Array; te: Float32Array }> = {};
    for (const name of ["peft", "kohya"]) {
      const set = await LoraSet.load([{ path: join(dir, `${name}.safetensors`), weight: 0.8 }]);
      results[name] = {
        unet: await out(await set.open(unetPath, "unet", SESSION), feeds().unet, "out_sample"),
        te: await out(
          await set.open(tePath, "text_encoder", SESSION),
          feeds().te,
          "last_hidden_state",
        ),
      };
      set.assertMatched(); // every module matched a node
    }
    notDeepStrictEqual(results.peft.unet, plain, "the PEFT LoRA changes the UNet");
    deepStrictEqual(results.peft.unet, results.kohya.unet);
    deepStrictEqual(results.peft.te, results.kohya.te);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
