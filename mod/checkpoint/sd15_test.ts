import { deepStrictEqual, rejects, strictEqual } from "node:assert";
import { join } from "node:path";
import { CheckpointError } from "./errors.ts";
import { openSd15Checkpoint, openVaeWeights, type Sd15Checkpoint } from "./sd15.ts";
import type { WeightMap } from "./weights.ts";
import {
  asWrite,
  EMA_OFFSET,
  olderDiffusersVae,
  originalLayout,
  originalVaeLayout,
  safetensorsBytes,
  type TestSd15,
  testSd15,
  type TestTensor,
  writeDiffusersFolder,
  writeOriginalSafetensors,
  type WriteTensor,
} from "./testing.ts";

async function inTemp(f: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "ckpt-sd15-" });
  try {
    await f(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** Asserts `got` holds exactly `want`'s names, shapes and values (plus `offset`). */
async function assertPart(
  got: WeightMap,
  want: Map<string, TestTensor>,
  label: string,
  offset = 0,
) {
  deepStrictEqual([...got.keys()].sort(), [...want.keys()].sort(), label);
  for (const [name, t] of want) {
    const g = got.get(name)!;
    deepStrictEqual(g.shape, t.shape, `${label} ${name} shape`);
    deepStrictEqual(await g.read(), t.data.map((x) => x + offset), `${label} ${name} values`);
  }
}

async function assertModel(ck: Sd15Checkpoint, m: TestSd15, unetOffset = 0): Promise<void> {
  await assertPart(ck.unet, m.unet, "unet", unetOffset);
  await assertPart(ck.vae, m.vae, "vae");
  await assertPart(ck.textEncoder, m.textEncoder, "text encoder");
}

/** A refusal: a CheckpointError of one line starting with the path and matching `re`. */
function refusal(path: string, re: RegExp) {
  return (e: Error) => {
    strictEqual(e instanceof CheckpointError, true, String(e));
    strictEqual(re.test(e.message), true, e.message);
    strictEqual(e.message.startsWith(path), true, e.message);
    strictEqual(e.message.includes("\n"), false);
    return true;
  };
}

for (const dtype of ["F32", "F16", "BF16"] as const) {
  Deno.test(`sd15: an original-layout ${dtype} safetensors file reads as diffusers' names and values`, async () => {
    await inTemp(async (dir) => {
      const m = testSd15();
      const path = join(dir, "model.safetensors");
      await writeOriginalSafetensors(path, m, { dtype });
      const ck = await openSd15Checkpoint(path);
      try {
        strictEqual(ck.layout, "original");
        strictEqual(ck.format, "safetensors");
        strictEqual(ck.ema, false);
        deepStrictEqual(ck.ignored, { count: 0, prefixes: [] });
        await assertModel(ck, m);
        strictEqual(ck.unet.get("conv_in.weight")!.dtype, dtype);
        // The VAE attention's 1×1 convs come back as Linear [C, C].
        deepStrictEqual(ck.vae.get("decoder.mid_block.attentions.0.to_q.weight")!.shape, [16, 16]);
      } finally {
        ck.close();
      }
    });
  });
}

Deno.test("sd15: EMA copies are ignored by default and taken with ema: true", async () => {
  await inTemp(async (dir) => {
    const m = testSd15();
    const path = join(dir, "ema.safetensors");
    await writeOriginalSafetensors(path, m, { ema: true, dtype: "F16" });
    const plain = await openSd15Checkpoint(path);
    await assertModel(plain, m);
    strictEqual(plain.ema, false);
    strictEqual(plain.ignored.count, m.unet.size + 2);
    deepStrictEqual(plain.ignored.prefixes, ["model_ema.*"]);
    plain.close();
    const ema = await openSd15Checkpoint(path, { ema: true });
    await assertModel(ema, m, EMA_OFFSET);
    strictEqual(ema.ema, true);
    // The regular UNet weights and the EMA counters are what is left.
    strictEqual(ema.ignored.count, m.unet.size + 2);
    deepStrictEqual(ema.ignored.prefixes, ["model.*", "model_ema.*"]);
    ema.close();
    const noEma = join(dir, "plain.safetensors");
    await writeOriginalSafetensors(noEma, m);
    await rejects(
      openSd15Checkpoint(noEma, { ema: true }),
      refusal(noEma, /no EMA weights \(model_ema\.\*\)/),
    );
  });
});

Deno.test("sd15: older text-encoder keys, extra keys, position_ids and a state_dict wrapper", async () => {
  await inTemp(async (dir) => {
    const m = testSd15({ positionIds: true });
    const path = join(dir, "old.safetensors");
    await writeOriginalSafetensors(path, m, {
      oldTextEncoderKeys: true,
      extraKeys: true,
      stateDictWrapper: true,
    });
    const ck = await openSd15Checkpoint(path);
    const want = { ...m, textEncoder: new Map(m.textEncoder) };
    want.textEncoder.delete("text_model.embeddings.position_ids");
    await assertModel(ck, want);
    deepStrictEqual(ck.ignored, {
      count: 6,
      prefixes: [
        "alphas_cumprod",
        "alphas_cumprod_prev",
        "betas",
        "cond_stage_model.transformer.embeddings.position_ids",
        "loss.*",
        "sqrt_alphas_cumprod",
      ],
    });
    ck.close();
  });
});

Deno.test("sd15: a diffusers folder (safetensors, fp16) reads as the same names", async () => {
  await inTemp(async (dir) => {
    const m = testSd15({ positionIds: true });
    await writeDiffusersFolder(dir, m, { dtype: "F16" });
    const ck = await openSd15Checkpoint(dir);
    strictEqual(ck.layout, "diffusers-folder");
    const want = { ...m, textEncoder: new Map(m.textEncoder) };
    want.textEncoder.delete("text_model.embeddings.position_ids");
    await assertModel(ck, want);
    deepStrictEqual(ck.ignored, {
      count: 1,
      prefixes: ["text_encoder/text_model.embeddings.position_ids"],
    });
    ck.close();
    await rejects(openSd15Checkpoint(dir, { ema: true }), refusal(dir, /has no EMA copy/));
  });
});

Deno.test("sd15: a diffusers folder without a component names it; an ONNX export is told apart", async () => {
  await inTemp(async (dir) => {
    await writeDiffusersFolder(dir, testSd15(), { omit: ["vae"] });
    await rejects(openSd15Checkpoint(dir), refusal(dir, /no vae\//));
    await Deno.writeFile(join(dir, "unet", "model.onnx"), new Uint8Array(4));
    await rejects(openSd15Checkpoint(dir), refusal(dir, /an ONNX export \(unet\/model\.onnx\)/));
  });
});

Deno.test("sd15: refusals name what was found and what is supported", async () => {
  await inTemp(async (dir) => {
    const m = testSd15();
    const write = async (name: string, tensors: Parameters<typeof safetensorsBytes>[0]) => {
      const path = join(dir, name);
      await Deno.writeFile(path, safetensorsBytes(tensors));
      return path;
    };
    const one = (name: string, shape = [2]): [string, WriteTensor] => [
      name,
      { shape, data: new Float32Array(shape.reduce((a, b) => a * b, 1)), dtype: "F32" },
    ];
    const cases: [string, RegExp][] = [
      [
        await write("sdxl.safetensors", [
          ...originalLayout(m),
          one("conditioner.embedders.0.transformer.text_model.final_layer_norm.weight"),
        ]),
        /an SDXL checkpoint/,
      ],
      [
        await write("sd2.safetensors", [
          ...originalLayout(m),
          one("cond_stage_model.model.ln_final.weight"),
        ]),
        /an SD 2\.x checkpoint \(OpenCLIP text encoder/,
      ],
      [
        await write(
          "sd2ctx.safetensors",
          originalLayout(testSd15({ context: 1024, textLayers: 1, vocab: 2 })),
        ),
        /an SD 2\.x checkpoint \(the UNet's cross-attention context is 1024 wide/,
      ],
      [
        await write("mixed.safetensors", [
          ...originalLayout({ ...m, textEncoder: testSd15({ context: 16 }).textEncoder }),
        ]),
        /the UNet's cross-attention context is 32 wide but the text encoder is 16 wide/,
      ],
      [
        await write("inpaint.safetensors", originalLayout(testSd15({ inChannels: 9 }))),
        /SD 1\.x inpainting UNet \(conv_in takes 9 input channels\).*inpaint_image uses the inpaint ControlNet with a regular checkpoint/,
      ],
      [
        await write("p2p.safetensors", originalLayout(testSd15({ inChannels: 8 }))),
        /instruct-pix2pix UNet \(conv_in takes 8/,
      ],
      [
        await write("lora.safetensors", [
          one("lora_unet_down_blocks_0_attentions_0_proj_in.lora_down.weight"),
          one("lora_unet_down_blocks_0_attentions_0_proj_in.alpha", []),
        ]),
        /a LoRA \(it has keys such as lora_unet_down_blocks_0_attentions_0_proj_in\.lora_down\.weight\), not a checkpoint/,
      ],
      [
        await write("peft.safetensors", [
          one("unet.down_blocks.0.attentions.0.proj_in.lora_A.weight"),
        ]),
        /a LoRA/,
      ],
      [
        await write("ti.safetensors", [one("emb_params", [2, 32])]),
        /a textual-inversion embedding \(it has emb_params\)/,
      ],
      [
        await write("nounet.safetensors", originalLayout(m, { omit: ["unet"] })),
        /no UNet \(model\.diffusion_model\.\*\); an SD 1\.x checkpoint has a UNet, a VAE and a text encoder$/,
      ],
      [
        await write("note.safetensors", originalLayout(m, { omit: ["textEncoder", "vae"] })),
        /no VAE \(first_stage_model\.\*\), no text encoder \(cond_stage_model\.transformer\.\*\)/,
      ],
      [
        await write("vaeonly.safetensors", originalLayout(m, { omit: ["textEncoder", "unet"] })),
        /a standalone VAE file is added with --component vae/,
      ],
      [
        await write("strayvae.safetensors", [
          ...originalLayout(m),
          one("first_stage_model.decoder.up.0.attn.0.q.weight"),
        ]),
        /VAE weight decoder\.up\.0\.attn\.0\.q\.weight is not part of an SD 1\.x VAE; supported/,
      ],
      [
        await write("vae-ft-mse.safetensors", originalVaeLayout(m.vae)),
        /no UNet .* \(a standalone VAE file is added with --component vae\)$/,
      ],
      [
        await write("stray.safetensors", [
          ...originalLayout(m),
          one("model.diffusion_model.label_emb.0.0.weight"),
        ]),
        /model\.diffusion_model\.label_emb\.0\.0\.weight is not part of an SD 1\.x UNet/,
      ],
    ];
    for (const [path, re] of cases) await rejects(openSd15Checkpoint(path), refusal(path, re));
    const missing = join(dir, "absent.safetensors");
    await rejects(openSd15Checkpoint(missing), refusal(missing, /cannot be read/));
  });
});

Deno.test("sd15: standalone VAE files in the original and diffusers layouts, and a vae/ folder", async () => {
  await inTemp(async (dir) => {
    const m = testSd15();
    const original = join(dir, "vae-ft-mse.safetensors");
    await Deno.writeFile(original, safetensorsBytes(originalVaeLayout(m.vae, "F16", true)));
    const a = await openVaeWeights(original);
    await assertPart(a.vae, m.vae, "original VAE");
    a.close();
    const older = join(dir, "diffusers-old.safetensors");
    await Deno.writeFile(older, safetensorsBytes(asWrite(olderDiffusersVae(m.vae), "BF16")));
    const b = await openVaeWeights(older);
    await assertPart(b.vae, m.vae, "older diffusers VAE");
    b.close();
    const whole = join(dir, "whole.safetensors");
    await writeOriginalSafetensors(whole, m);
    const c = await openVaeWeights(whole);
    await assertPart(c.vae, m.vae, "VAE of a whole checkpoint");
    c.close();
    const folder = join(dir, "pipe");
    await writeDiffusersFolder(folder, m);
    for (const p of [folder, join(folder, "vae")]) {
      const d = await openVaeWeights(p);
      await assertPart(d.vae, m.vae, p);
      d.close();
    }
    const half = join(dir, "decoder-only.safetensors");
    await Deno.writeFile(
      half,
      safetensorsBytes(asWrite(new Map([...m.vae].filter(([k]) => !k.startsWith("encoder."))))),
    );
    await rejects(
      openVaeWeights(half),
      refusal(half, /not a whole SD 1\.x VAE \(no encoder\.conv_in\.weight\)/),
    );
  });
});

Deno.test("sd15: a diffusers folder whose UNet is sharded with an index", async () => {
  await inTemp(async (dir) => {
    const m = testSd15();
    await writeDiffusersFolder(dir, m);
    const unetDir = join(dir, "unet");
    await Deno.remove(join(unetDir, "diffusion_pytorch_model.safetensors"));
    const names = [...m.unet.keys()];
    const half = Math.floor(names.length / 2);
    const shards = [names.slice(0, half), names.slice(half)];
    const weightMap: Record<string, string> = {};
    for (const [i, shard] of shards.entries()) {
      const file = `diffusion_pytorch_model-0000${i + 1}-of-00002.safetensors`;
      await Deno.writeFile(
        join(unetDir, file),
        safetensorsBytes(asWrite(new Map(shard.map((k) => [k, m.unet.get(k)!])))),
      );
      for (const k of shard) weightMap[k] = file;
    }
    await Deno.writeTextFile(
      join(unetDir, "diffusion_pytorch_model.safetensors.index.json"),
      JSON.stringify({ metadata: {}, weight_map: weightMap }),
    );
    const ck = await openSd15Checkpoint(dir);
    await assertPart(ck.unet, m.unet, "sharded unet");
    ck.close();
  });
});

Deno.test("sd15: every weight is checked against SD 1.x's names and shapes at the file's own widths", async () => {
  await inTemp(async (dir) => {
    const m = testSd15();
    const write = async (name: string, tensors: [string, WriteTensor][]) => {
      const path = join(dir, name);
      await Deno.writeFile(path, safetensorsBytes(tensors));
      return path;
    };
    const base = originalLayout(m);
    const dropped = "model.diffusion_model.input_blocks.4.1.transformer_blocks.0.ff.net.2.bias";
    const missing = await write("missing.safetensors", base.filter(([k]) => k !== dropped));
    await rejects(
      openSd15Checkpoint(missing),
      refusal(
        missing,
        /the UNet does not have SD 1\.x's layout: 1 weight missing \(first: down_blocks\.1\.attentions\.0\.transformer_blocks\.0\.ff\.net\.2\.bias\)/,
      ),
    );
    const bent = await write(
      "bent.safetensors",
      base.map(([k, t]): [string, WriteTensor] =>
        k === "first_stage_model.decoder.conv_out.weight"
          ? [k, { ...t, shape: [3, 4, 9, 1] }]
          : [k, t]
      ),
    );
    await rejects(
      openSd15Checkpoint(bent),
      refusal(
        bent,
        /the VAE does not have SD 1\.x's layout: decoder\.conv_out\.weight is \[3,4,9,1\] where SD 1\.x has \[3,4,3,3\]/,
      ),
    );
    const deeper = await write("deeper.safetensors", [
      ...base,
      [
        "model.diffusion_model.input_blocks.1.1.transformer_blocks.1.attn1.to_q.weight",
        { shape: [4, 4], data: new Float32Array(16), dtype: "F32" },
      ],
    ]);
    await rejects(
      openSd15Checkpoint(deeper),
      refusal(
        deeper,
        /1 weight SD 1\.x does not have \(first: down_blocks\.0\.attentions\.0\.transformer_blocks\.1\.attn1\.to_q\.weight\)/,
      ),
    );
    // A text-encoder tensor CLIPTextModel does not have is left out and counted, as transformers does.
    const extraTe = await write("logit.safetensors", [
      ...base,
      ["cond_stage_model.transformer.text_model.logit_scale", {
        shape: [],
        data: Float32Array.of(1),
        dtype: "F32",
      }],
    ]);
    const ck = await openSd15Checkpoint(extraTe);
    strictEqual(ck.textEncoder.has("text_model.logit_scale"), false);
    deepStrictEqual(ck.ignored, {
      count: 1,
      prefixes: ["cond_stage_model.transformer.text_model.logit_scale"],
    });
    ck.close();
    const vae = join(dir, "bent-vae.safetensors");
    await Deno.writeFile(
      vae,
      safetensorsBytes(originalVaeLayout(m.vae).filter(([k]) => k !== "encoder.mid.attn_1.k.bias")),
    );
    await rejects(
      openVaeWeights(vae),
      refusal(
        vae,
        /not an SD 1\.x VAE: 1 weight missing \(first: encoder\.mid_block\.attentions\.0\.to_k\.bias\)/,
      ),
    );
  });
});
