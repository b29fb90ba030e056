/**
 * The fast preset end to end: the real program over real stdio with
 * `[generation] preset = "fast"` (a built LCM-LoRA stand-in in kohya layout,
 * locked like any model) and `[models] vae_decoder = "tiny"` (the built
 * TAESD-structure decoder), on a copy of the tiny set.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { readPngText } from "../mod/image/mod.ts";
import { buildTinyLora, lockEntry, lockText, parseLock } from "../mod/model_builder/mod.ts";
import { ROOT } from "./helpers/paths.ts";
import { pngs, texts } from "./helpers/results.ts";
import { connectStdio } from "./helpers/stdio_server.ts";
import { copyDir } from "./helpers/copy_dir.ts";

Deno.test('preset = "fast" with vae_decoder = "tiny": LCM LoRA blended, 4 steps, tiny decoder, a PNG', async () => {
  const dir = await Deno.makeTempDir({ prefix: "sd15-fast-" });
  try {
    const fixtures = join(ROOT, "tests/fixtures/tiny");
    for (const sub of ["sd15", "taesd"]) {
      await copyDir(join(fixtures, "models", sub), join(dir, "models", sub));
    }
    const lora = buildTinyLora(41, { rank: 4, alpha: 4 });
    await Deno.mkdir(join(dir, "models/lora/lcm-lora-sdv1-5"), { recursive: true });
    await Deno.writeFile(
      join(dir, "models/lora/lcm-lora-sdv1-5/pytorch_lora_weights.safetensors"),
      lora,
    );
    const entries = parseLock(await Deno.readTextFile(join(fixtures, "models.lock")))
      .filter((e) => e.path.startsWith("sd15/") || e.path.startsWith("taesd/"));
    entries.push(lockEntry("lora", "lora/lcm-lora-sdv1-5/pytorch_lora_weights.safetensors", lora));
    await Deno.writeTextFile(join(dir, "models.lock"), lockText(entries));
    const config = join(dir, "config.toml");
    await Deno.writeTextFile(
      config,
      `[server]\ndata_dir = ${JSON.stringify(join(dir, "data"))}\n` +
        `[models]\nroot = "models"\nvae_decoder = "tiny"\n` +
        `[runtime]\nintra_op_threads = 1\ninter_op_threads = 1\n` +
        `[generation]\npreset = "fast"\nsteps = 40\n`,
    );
    const session = await connectStdio(["--config", config]);
    try {
      const progress: number[] = [];
      const result = await session.client.callTool(
        {
          name: "generate_image",
          arguments: { positive_prompt: "a quick fox", size: "square_512" },
        },
        undefined,
        { onprogress: (p) => progress.push(p.progress) },
      );
      assert.equal(result.isError, undefined, texts(result));
      const [png] = pngs(result);
      assert.equal(readPngText(png).size, "square_512");
      assert.equal(Math.max(...progress), 4, `progress ${progress}`);
      assert.match(session.stderr(), /blended LoRA weights/);
      // Only sd15/ was copied: base = "auto" fell back to it on the CPU provider, and says so.
      assert.match(session.stderr(), /running the fp16 SD 1\.5 set on the CPU provider/);
      assert.match(session.stderr(), /lcm-lora-sdv1-5\/pytorch_lora_weights\.safetensors/);
    } finally {
      await session.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
