/**
 * A checkpoint as a user brings it: `deno task models add FILE --write-config`
 * converts it (no Python), locks it as a derived set and points
 * config.local.toml at it; then the real server starts on it over stdio and
 * an MCP client generates. Every accepted layout of the same test-sized
 * weights (`mod/checkpoint/testing.ts`: exactly representable in fp16 and
 * bf16) must give the same ONNX files, byte for byte, as the first, which
 * the server generates with (an image takes ~15 s on 2 cores: the test-sized
 * UNet attends over all 4096 latent positions at 512², so identical files
 * stand for identical images); the EMA weights another UNet and another
 * image; a second add converts and writes nothing; a changed converted file
 * is converted again at start-up; a standalone VAE changes the image.
 *
 * The test-sized model has the tiny fixtures' widths where the server
 * meets them (UNet blocks 8/16/32, text width 32, CLIP's 49408 tokens and
 * 77 positions), so the fixtures' ControlNets fit its residuals.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import {
  asWrite,
  originalVaeLayout,
  safetensorsBytes,
  type TestSd15,
  testSd15,
  writeDiffusersFolder,
  writeOriginalCkpt,
  writeOriginalSafetensors,
} from "../mod/checkpoint/testing.ts";
import { readLock } from "../mod/models/mod.ts";
import {
  add,
  type CheckpointWorkspace,
  checkpointWorkspace,
  generate,
  MODEL,
  setHashes,
  snapshotTree,
} from "./helpers/checkpoint_workspace.ts";
import { modelsTask } from "./helpers/models_cli.ts";

/** `[models] key` as config.local.toml holds it. */
async function localKey(ws: CheckpointWorkspace, key: string): Promise<string | undefined> {
  const text = await Deno.readTextFile(join(ws.dir, "config.local.toml")).catch(() => "");
  return new RegExp(`^${key} = "([^"]*)"`, "m").exec(text)?.[1];
}

Deno.test("every checkpoint layout converts to the same set and the server generates with it", async (t) => {
  const ws = await checkpointWorkspace();
  try {
    const m = ws.models;
    await Deno.mkdir(join(m, "ck"));
    // name → how it is written, the flags, and whether its UNet is the EMA copy.
    const layouts: Array<[string, () => Promise<string>, string[], boolean]> = [
      [
        "original fp32 .safetensors",
        async () => {
          await writeOriginalSafetensors(join(m, "ck/fp32.safetensors"), MODEL);
          return "models/ck/fp32.safetensors";
        },
        [],
        false,
      ],
      [
        "original fp16 .safetensors",
        async () => {
          await writeOriginalSafetensors(join(m, "ck/fp16.safetensors"), MODEL, { dtype: "F16" });
          return "models/ck/fp16.safetensors";
        },
        [],
        false,
      ],
      [
        "original bf16 .safetensors",
        async () => {
          await writeOriginalSafetensors(join(m, "ck/bf16.safetensors"), MODEL, { dtype: "BF16" });
          return "models/ck/bf16.safetensors";
        },
        [],
        false,
      ],
      [
        "with EMA weights and extra keys (trained UNet)",
        async () => {
          await writeOriginalSafetensors(join(m, "ck/ema.safetensors"), MODEL, {
            ema: true,
            extraKeys: true,
          });
          return "models/ck/ema.safetensors";
        },
        [],
        false,
      ],
      [
        "with EMA weights, --ema",
        () => Promise.resolve("models/ck/ema.safetensors"),
        ["--ema"],
        true,
      ],
      [
        "older text-encoder keys",
        async () => {
          await writeOriginalSafetensors(join(m, "ck/old-te.safetensors"), MODEL, {
            oldTextEncoderKeys: true,
          });
          return "models/ck/old-te.safetensors";
        },
        [],
        false,
      ],
      [
        "state_dict-wrapped .ckpt",
        async () => {
          await writeOriginalCkpt(join(m, "ck/wrapped.ckpt"), MODEL, { stateDictWrapper: true });
          return "models/ck/wrapped.ckpt";
        },
        [],
        false,
      ],
      [
        "diffusers folder, .safetensors",
        async () => {
          await writeDiffusersFolder(join(m, "ck/diffusers-st"), MODEL, { dtype: "F16" });
          return "models/ck/diffusers-st";
        },
        [],
        false,
      ],
      [
        "diffusers folder, .bin",
        async () => {
          await writeDiffusersFolder(join(m, "ck/diffusers-bin"), MODEL, { bin: true });
          return "models/ck/diffusers-bin";
        },
        [],
        false,
      ],
    ];
    let reference: Record<string, string> | undefined;
    let referenceImage: Uint8Array | undefined;
    for (const [name, write, flags, ema] of layouts) {
      await t.step(name, async () => {
        const target = await write();
        const run = await add(ws, ...flags, target, "--write-config");
        const base = await localKey(ws, "base");
        assert.ok(base?.startsWith("converted/"), `config.local.toml base: ${base}`);
        assert.equal(await localKey(ws, "controlnet_unet"), `${base}/controlnet_unet/model.onnx`);
        const hashes = await setHashes(ws, base!);
        if (reference === undefined) {
          const image = await generate(ws);
          reference = hashes;
          referenceImage = image.pixels;
          for (
            const f of [
              "text_encoder/model.onnx",
              "unet/model.onnx",
              "vae_decoder/model.onnx",
              "vae_encoder/model.onnx",
              "controlnet_unet/model.onnx",
              "tokenizer/vocab.json",
              "tokenizer/merges.txt",
              "scheduler/scheduler_config.json",
            ]
          ) assert.ok(hashes[f], `${f} converted`);
        } else if (!ema) {
          // Byte-identical ONNX files: the server makes the reference's image from them.
          assert.deepEqual(hashes, reference, "the same weights give the same files");
        } else {
          const image = await generate(ws);
          const differs = Object.keys(reference).filter((f) => hashes[f] !== reference![f]);
          assert.deepEqual(
            differs.map((f) => f.split("/")[0]).filter((v, i, a) => a.indexOf(v) === i).sort(),
            ["controlnet_unet", "unet"],
            "--ema changes the UNets only",
          );
          assert.notDeepEqual(image.pixels, referenceImage, "the EMA UNet makes another image");
        }
        if (name.startsWith("with EMA weights and extra")) {
          assert.match(run.stderr, /ignored \d+ keys the conversion does not use: .*model_ema/);
        }
      });
    }

    await t.step(
      "the converted set passes `models check`, and a second add writes nothing",
      async () => {
        const checked = await modelsTask(ws.dir, ["check"]);
        assert.equal(checked.code, 0, checked.stdout + checked.stderr);
        const before = await snapshotTree(ws.dir);
        const again = await add(ws, "models/ck/diffusers-bin", "--write-config");
        assert.match(again.stderr, /already holds this conversion \(fp32\); nothing converted/);
        assert.match(again.stderr, /nothing was written/);
        assert.deepEqual(await snapshotTree(ws.dir), before);
        // The lock records the set as derived from its inputs, with the options.
        const lock = await readLock(join(ws.dir, "models.lock"));
        const set = lock.derived.find((d) => d.path === "converted/diffusers-bin-fp32");
        assert.ok(set);
        assert.equal(set.converter, "sd15-checkpoint");
        assert.deepEqual(set.options, { precision: "fp32", ema: false });
        assert.ok(set.from.includes("ck/diffusers-bin/unet/diffusion_pytorch_model.bin"));
      },
    );

    await t.step("a changed converted file is converted again at start-up", async () => {
      const base = (await localKey(ws, "base"))!;
      await Deno.writeTextFile(join(m, base, "scheduler/scheduler_config.json"), "{}");
      const image = await generate(ws);
      assert.deepEqual(image.pixels, referenceImage);
      assert.deepEqual(await setHashes(ws, base), reference);
    });
  } finally {
    await ws.remove();
  }
});

/** `vae` with every value scaled, a VAE that decodes visibly differently. */
function otherVae(vae: TestSd15["vae"]): TestSd15["vae"] {
  return new Map(
    [...vae].map(([k, t]) => [k, { shape: t.shape, data: t.data.map((x) => -x / 2) }]),
  );
}

Deno.test("a standalone VAE, in original or diffusers keys, replaces the checkpoint's and changes the image", async () => {
  const ws = await checkpointWorkspace();
  try {
    await writeOriginalSafetensors(join(ws.models, "ck.safetensors"), MODEL);
    await add(ws, "models/ck.safetensors", "--write-config");
    const plain = await generate(ws);
    const vae = otherVae(MODEL.vae);
    await Deno.mkdir(join(ws.models, "vae/diffusers"), { recursive: true });
    await Deno.writeFile(
      join(ws.models, "vae/original.safetensors"),
      safetensorsBytes(originalVaeLayout(vae, "F16", true)),
    );
    await Deno.writeFile(
      join(ws.models, "vae/diffusers/diffusion_pytorch_model.safetensors"),
      safetensorsBytes(asWrite(vae)),
    );
    await Deno.writeTextFile(join(ws.models, "vae/diffusers/config.json"), "{}");

    await add(ws, "--component", "vae", "models/vae/diffusers", "--write-config");
    assert.equal(await localKey(ws, "vae"), "converted/vae/diffusers-fp32");
    const fromDiffusers = await setHashes(ws, "converted/vae/diffusers-fp32");
    assert.deepEqual(Object.keys(fromDiffusers).sort(), [
      "vae_decoder/model.onnx",
      "vae_encoder/model.onnx",
    ]);
    await add(ws, "--component", "vae", "models/vae/original.safetensors", "--write-config");
    assert.equal(await localKey(ws, "vae"), "converted/vae/original-fp32");
    assert.deepEqual(
      await setHashes(ws, "converted/vae/original-fp32"),
      fromDiffusers,
      "original and diffusers keys of the same VAE give the same files",
    );
    const withVae = await generate(ws);
    assert.equal(withVae.text.vae_decoder, "full");
    assert.notDeepEqual(withVae.pixels, plain.pixels, "the VAE changes the image");
    const checked = await modelsTask(ws.dir, ["check"]);
    assert.equal(checked.code, 0, checked.stdout + checked.stderr);
    assert.match(checked.stdout, /ok\s+converted\/vae\/original-fp32\/vae_decoder\/model\.onnx/);

    // --precision both: the fp32 set is in place (nothing converted), the fp16 one is added,
    // and the config keeps pointing at the CPU provider's fp32 one.
    const both = await add(
      ws,
      "--component",
      "vae",
      "models/vae/original.safetensors",
      "--precision",
      "both",
      "--write-config",
    );
    assert.match(both.stderr, /original-fp32 already holds this conversion \(fp32\)/);
    assert.match(
      both.stderr,
      /converted vae\/original\.safetensors into converted\/vae\/original-fp16/,
    );
    assert.equal(await localKey(ws, "vae"), "converted/vae/original-fp32");
    const fp16 = await setHashes(ws, "converted/vae/original-fp16");
    assert.notEqual(fp16["vae_decoder/model.onnx"], fromDiffusers["vae_decoder/model.onnx"]);
    const lock = await readLock(join(ws.dir, "models.lock"));
    assert.deepEqual(
      lock.derived.filter((d) => d.path.startsWith("converted/vae/original-")).map((d) => [
        d.path,
        d.options,
      ]),
      [
        ["converted/vae/original-fp32", { precision: "fp32" }],
        ["converted/vae/original-fp16", { precision: "fp16" }],
      ],
    );
  } finally {
    await ws.remove();
  }
});

// The cache is on in the workspace. The test model's text encoder is 32 wide: ONNX Runtime writes
// its pre-packed projections off the 64-byte boundary its kernels need (its 77×77 causal mask
// ahead of them is 23,716 bytes), and a second start that opened them died with SIGSEGV; the
// cache now keeps that graph without them (mod/onnx optimized_cache.ts). SD 1.x's 768-wide one
// (one layer, to stay small) keeps its pre-packed weights, each over 1 MiB and page-aligned.
for (
  const [name, model, prepacked] of [
    ["a narrow converted set (text width 32)", () => MODEL, false],
    [
      "a converted set of SD 1.x's text width (768)",
      () => testSd15({ unetWidth: 8, context: 768, textLayers: 1, vocab: 49408, positions: 77 }),
      true,
    ],
  ] as const
) {
  Deno.test(`${name} opens from the optimised-graph cache at the second start, same image`, async () => {
    const ws = await checkpointWorkspace();
    try {
      await writeOriginalSafetensors(join(ws.models, "ck.safetensors"), model());
      await add(ws, "models/ck.safetensors", "--write-config");
      const first = await generate(ws);
      const again = /text_encoder: optimising again to keep its graph without pre-packed weights/;
      if (prepacked) assert.doesNotMatch(first.log, again);
      else assert.match(first.log, again);
      const second = await generate(ws);
      for (const part of ["text_encoder", "unet", "vae_decoder"]) {
        assert.match(second.log, new RegExp(`${part}: opened its optimised graph from the cache`));
      }
      assert.deepEqual(second.pixels, first.pixels);
    } finally {
      await ws.remove();
    }
  });
}
