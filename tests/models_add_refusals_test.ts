/**
 * Every refusal of `deno task models add` for a checkpoint, diffusers folder
 * or VAE, through the CLI as a user runs it: exit status 1, one ERROR line
 * naming what was found and what is supported, and nothing written — the
 * workspace (models root, lock, config) is byte for byte and mtime for
 * mtime what it was.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import {
  originalLayout,
  originalVaeLayout,
  type PyValue,
  safetensorsBytes,
  stateDict,
  testSd15,
  type WriteTensor,
  writeTorchFile,
} from "../mod/checkpoint/testing.ts";
import { checkpointWorkspace, errorLines, snapshotTree } from "./helpers/checkpoint_workspace.ts";
import { modelsTask } from "./helpers/models_cli.ts";

/** A safetensors file with a raw header (for dtypes the writer does not know). */
function rawSafetensors(header: Record<string, unknown>, data: Uint8Array): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify(header));
  const out = new Uint8Array(8 + json.length + data.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(json, 8);
  out.set(data, 8 + json.length);
  return out;
}

Deno.test("models add refuses what is not an SD 1.x checkpoint: one line, exit 1, nothing written", async () => {
  const ws = await checkpointWorkspace();
  try {
    const m = testSd15();
    const one = (name: string, shape = [2]): [string, WriteTensor] => [
      name,
      { shape, data: new Float32Array(shape.reduce((a, b) => a * b, 1)), dtype: "F32" },
    ];
    const files: Array<[string, Uint8Array, RegExp, string[]?]> = [
      [
        "sdxl.safetensors",
        safetensorsBytes([
          ...originalLayout(m),
          one("conditioner.embedders.0.transformer.text_model.final_layer_norm.weight"),
        ]),
        /an SDXL checkpoint/,
      ],
      [
        "sd2.safetensors",
        safetensorsBytes([...originalLayout(m), one("cond_stage_model.model.ln_final.weight")]),
        /an SD 2\.x checkpoint \(OpenCLIP text encoder/,
      ],
      [
        "sd2ctx.safetensors",
        safetensorsBytes(originalLayout(testSd15({ context: 1024, textLayers: 1, vocab: 2 }))),
        /an SD 2\.x checkpoint \(the UNet's cross-attention context is 1024 wide/,
      ],
      [
        "inpaint.safetensors",
        safetensorsBytes(originalLayout(testSd15({ inChannels: 9 }))),
        /inpainting UNet.*inpaint_image uses the inpaint ControlNet with a regular checkpoint/,
      ],
      [
        "lora.safetensors",
        safetensorsBytes([
          one("lora_unet_down_blocks_0_attentions_0_proj_in.lora_down.weight"),
          one("lora_unet_down_blocks_0_attentions_0_proj_in.alpha", []),
        ]),
        /a LoRA .*not a checkpoint/,
      ],
      [
        "embedding.safetensors",
        safetensorsBytes([one("emb_params", [2, 32])]),
        /a textual-inversion embedding/,
      ],
      [
        "truncated.safetensors",
        safetensorsBytes(originalLayout(m)).slice(0, 4000),
        /truncat|beyond|past the end|shorter|bytes/i,
      ],
      [
        "garbage.safetensors",
        new TextEncoder().encode("this is not a safetensors file at all, just text"),
        /header|not a safetensors|safetensors/i,
      ],
      [
        "dtype.safetensors",
        rawSafetensors(
          {
            "model.diffusion_model.conv_in.weight": {
              dtype: "F8_E4M3",
              shape: [4],
              data_offsets: [0, 4],
            },
          },
          new Uint8Array(4),
        ),
        /F8_E4M3/,
      ],
      [
        "ema.safetensors",
        safetensorsBytes(originalLayout(m)),
        /no EMA weights/,
        ["--ema"],
      ],
      [
        "notvae.safetensors",
        safetensorsBytes(originalLayout(m, { omit: ["vae"] })),
        /not a whole SD 1\.x VAE|VAE/,
        ["--component", "vae"],
      ],
    ];
    for (const [name, bytes] of files) await Deno.writeFile(join(ws.models, name), bytes);
    // A .ckpt whose pickle would run a shell command when unpickled by torch.load.
    const marker = join(ws.dir, "pwned");
    const payload: PyValue = { reduce: [{ global: ["os", "system"] }, [`touch ${marker}`]] };
    await writeTorchFile(join(ws.models, "evil.ckpt"), {
      dict: [["state_dict", stateDict(originalLayout(m))], ["callbacks", payload]],
    });
    // Not a model format at all, and a file outside the models root.
    await Deno.writeTextFile(join(ws.models, "notes.txt"), "hello");
    await Deno.writeFile(join(ws.dir, "outside.safetensors"), safetensorsBytes(originalLayout(m)));
    const vaeFile = join(ws.models, "vae.safetensors");
    await Deno.writeFile(vaeFile, safetensorsBytes(originalVaeLayout(m.vae)));

    const before = await snapshotTree(ws.dir);
    const cases: Array<[string[], RegExp, number]> = [
      ...files.map(([name, , re, flags]) =>
        [["add", ...(flags ?? []), `models/${name}`], re, 1] as [string[], RegExp, number]
      ),
      [
        ["add", "models/notes.txt"],
        /takes an SD 1\.x checkpoint \(\.safetensors, \.ckpt, \.pt, \.bin\)/,
        1,
      ],
      [["add", "outside.safetensors"], /is not under the models root/, 1],
      [["add", "models/evil.ckpt"], /refused: the pickle names the global `os\.system`/, 1],
      // A flag that does not fit the input is a usage mistake (exit status 2).
      [["add", "--ema", "--component", "vae", "models/vae.safetensors"], /--ema applies/, 2],
    ];
    for (const [args, re, code] of cases) {
      const run = await modelsTask(ws.dir, args);
      const label = `${args.join(" ")}:\n${run.stderr}`;
      const errors = errorLines(run.stderr);
      assert.equal(errors.length, 1, label);
      assert.match(errors[0], re, label);
      assert.equal(run.code, code, label);
      assert.deepEqual(await snapshotTree(ws.dir), before, `${label}: something was written`);
    }
    assert.equal(await Deno.stat(marker).then(() => true, () => false), false, "os.system ran");
  } finally {
    await ws.remove();
  }
});
