/**
 * What the server does on the pinned set it does on a converted checkpoint:
 * ControlNet guidance (depth), inpainting, image-to-image and upscale on the
 * set `models add` wrote (its ControlNet-residual UNet made from the same
 * weights), a LoRA from `[lora] files`, and the fast and turbo presets
 * (their LoRA merged into the converted UNet, TAESD decoding). And a stop:
 * SIGTERM or SIGINT while `models add` converts leaves the workspace as it
 * was.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import {
  safetensorsBytes,
  writeOriginalSafetensors,
  type WriteTensor,
} from "../mod/checkpoint/testing.ts";
import { encodePng } from "../mod/image/mod.ts";
import type { RgbImage } from "../mod/pipeline/types.ts";
import { lockEntry } from "./fixtures/builder/mod.ts";
import { entryToml } from "../mod/models/mod.ts";
import {
  add,
  checkpointWorkspace,
  generate,
  MODEL,
  snapshotTree,
} from "./helpers/checkpoint_workspace.ts";
import { layOutPresetModels } from "./helpers/fast_models.ts";
import { ROOT } from "./helpers/paths.ts";

/** The `[generation]` table of these tests: one quick step, no CFG, a fixed seed, no hand-off. */
const QUICK =
  'preset = "quality"\nscheduler = "ddim"\nsteps = 1\nguidance_scale = 1.0\nseed = 7\nmax_wait_seconds = 0';

/**
 * A kohya LoRA for the test model's UNet: every attention projection, by
 * diffusers module name (the node names a torch export gives them).
 */
function unetLora(seed: number, scale: number): Uint8Array {
  const tensors: Array<[string, WriteTensor]> = [];
  let h = seed;
  const rnd = () => {
    h = Math.imul(h ^ (h >>> 15), 2246822507) + 1;
    return (((h >>> 0) % 257) - 128) / 128 * scale;
  };
  const rank = 2;
  for (const [name, t] of MODEL.unet) {
    const m = /^(.*\.attn[12]\.(to_q|to_k|to_v|to_out\.0))\.weight$/.exec(name);
    if (!m) continue;
    const [out, inp] = t.shape;
    const key = `lora_unet_${m[1].replaceAll(".", "_")}`;
    tensors.push(
      [`${key}.lora_down.weight`, {
        shape: [rank, inp],
        data: Float32Array.from({ length: rank * inp }, rnd),
        dtype: "F32",
      }],
      [`${key}.lora_up.weight`, {
        shape: [out, rank],
        data: Float32Array.from({ length: out * rank }, rnd),
        dtype: "F32",
      }],
      [`${key}.alpha`, { shape: [], data: Float32Array.of(rank), dtype: "F32" }],
    );
  }
  return safetensorsBytes(tensors);
}

async function photo(width: number, height: number): Promise<string> {
  const data = new Uint8Array(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      data.set([x % 256, (y * 2) % 256, (x + 3 * y) % 256], (y * width + x) * 3);
    }
  }
  const image: RgbImage = { width, height, data };
  return `data:image/png;base64,${(await encodePng(image, {})).toBase64()}`;
}

Deno.test("guided, inpaint, image-to-image, upscale, a LoRA and the fast and turbo presets on a converted checkpoint", async (t) => {
  const ws = await checkpointWorkspace(
    QUICK,
    "\n[controlnet.depth]\nenabled = true\n\n[controlnet.inpaint]\nenabled = true\n",
  );
  try {
    // The preset LoRAs and TAESD as the shipped lock has them, the fixtures' ControlNets.
    const presetLock = await layOutPresetModels(ws.models);
    await Deno.writeTextFile(join(ws.dir, "models.lock"), presetLock);
    await writeOriginalSafetensors(join(ws.models, "ck.safetensors"), MODEL);
    await add(ws, "models/ck.safetensors", "--write-config");
    const plain = await generate(ws);

    await t.step("ControlNet depth, inpaint, transform and upscale", async () => {
      const input = await photo(200, 150);
      const guided = await generate(ws, "generate_guided_image", {
        positive_prompt: "a dancer",
        control_mode: "depth",
        input_image: input,
        size: "square_512",
      });
      assert.equal(guided.text.mode, "guided_image");
      const inpaint = await generate(ws, "inpaint_image", {
        positive_prompt: "a boat",
        input_image: input,
        mask_image: await photo(64, 64),
      });
      assert.equal(inpaint.text.mode, "inpaint_image");
      const transform = await generate(ws, "transform_image", {
        positive_prompt: "an oil painting of a harbour",
        input_image: input,
        change: "strong",
        size: "landscape_512",
      });
      assert.equal(transform.text.mode, "image_to_image");
      const upscale = await generate(ws, "upscale_image", { input_image: input });
      // The 1024-wide result (or its inline preview, when the PNG is too large to inline).
      assert.ok(upscale.width > 200, `upscaled to ${upscale.width} wide`);
    });

    await t.step("a LoRA of the checkpoint's UNet changes the image", async () => {
      const lora = unetLora(11, 0.5);
      await Deno.mkdir(join(ws.models, "lora/mine"), { recursive: true });
      await Deno.writeFile(join(ws.models, "lora/mine/style.safetensors"), lora);
      await add(ws, "--component", "lora", "models/lora/mine/style.safetensors", "--write-config");
      const styled = await generate(ws);
      assert.notDeepEqual(styled.pixels, plain.pixels);
    });

    for (const preset of ["fast", "turbo"] as const) {
      await t.step(`the ${preset} preset merges its LoRA into the converted UNet`, async () => {
        // The preset LoRA stand-ins are shaped for the fixtures' UNet: this one is the checkpoint's.
        const path = preset === "fast"
          ? "lora/lcm-lora-sdv1-5/pytorch_lora_weights.safetensors"
          : "lora/hyper-sd/Hyper-SD15-1step-lora.safetensors";
        const bytes = unetLora(preset === "fast" ? 3 : 5, 0.3);
        await Deno.writeFile(join(ws.models, path), bytes);
        const lockText = await Deno.readTextFile(join(ws.dir, "models.lock"));
        const entry = entryToml(lockEntry("lora", path, bytes));
        await Deno.writeTextFile(
          join(ws.dir, "models.lock"),
          lockText.replace(
            new RegExp(`\\[\\[file\\]\\]\\ncomponent = "lora"\\npath = "${path}"\\n[^\\[]*`),
            `${entry}\n`,
          ),
        );
        // The preset's own sampling: only the seed and the wait are written.
        const cfg = await Deno.readTextFile(ws.config);
        await Deno.writeTextFile(
          ws.config,
          cfg.replace(
            /preset = "[a-z]+"[^[]*/,
            `preset = "${preset}"\nseed = 7\nmax_wait_seconds = 0\n\n`,
          ),
        );
        const image = await generate(ws);
        assert.equal(image.text.preset, preset);
        assert.equal(image.text.vae_decoder, "tiny");
      });
    }
  } finally {
    await ws.remove();
  }
});

for (const signal of ["SIGTERM", "SIGINT"] as const) {
  Deno.test(`${signal} during a conversion leaves nothing behind`, async () => {
    const ws = await checkpointWorkspace();
    try {
      await writeOriginalSafetensors(join(ws.models, "ck.safetensors"), MODEL);
      const before = await snapshotTree(ws.dir);
      // The CLI's test hook holds the finished files in the scratch folder (before they are
      // recorded and moved into place), so the signal arrives mid-conversion however fast it is.
      const child = new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "--config",
          join(ROOT, "deno.json"),
          "-P=models",
          "--quiet",
          join(ROOT, "mod/models/cli.ts"),
          "add",
          "models/ck.safetensors",
          "--write-config",
        ],
        cwd: ws.dir,
        stdin: "null",
        stdout: "null",
        stderr: "piped",
        env: { NO_COLOR: "1", SD_MCP_TEST_HOLD_CONVERSION_MS: "120000" },
      }).spawn();
      const stderr = new Response(child.stderr).text();
      // Wait for the scratch folder to hold the converted UNet.
      const converted = join(ws.models, "converted");
      let scratch: string | undefined;
      for (let i = 0; i < 1200 && scratch === undefined; i++) {
        await new Promise((r) => setTimeout(r, 100));
        try {
          for await (const e of Deno.readDir(converted)) {
            if (!e.name.includes(".building-")) continue;
            const unet = await Deno.stat(join(converted, e.name, "unet/model.onnx"))
              .catch(() => null);
            if (unet?.isFile) scratch = e.name;
          }
        } catch {
          // not created yet
        }
      }
      assert.ok(scratch, "the conversion never reached its scratch folder");
      child.kill(signal);
      const status = await child.status;
      const log = await stderr;
      assert.equal(status.code, 130, log);
      assert.match(log, /interrupted/);
      assert.deepEqual(await snapshotTree(ws.dir), before, log);
    } finally {
      await ws.remove();
    }
  });
}
