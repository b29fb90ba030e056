/**
 * The fp32 set derived from the fp16 download, end to end: the tiny fp16
 * export laid out where the shipped models.lock pins the fp16 set
 * (`sd15/`, the UNet's weights in `weights.pb`), with the shipped lock's
 * own `[[derived]]` tables for `sd15-fp32-derived/`; `base = "auto"` on the
 * CPU provider picks the derived set, the first start widens it, and the
 * server makes images from it with every model the image tools open,
 * the VAE encoder of `transform_image` (rewritten at load) included.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { encodePng, readPngText } from "../mod/image/mod.ts";
import { lockText, parseLock as parseBuilderLock } from "./fixtures/builder/mod.ts";
import { derivedToml, parseLock, readDerivedRecord } from "../mod/models/mod.ts";
import { copyDir } from "./helpers/copy_dir.ts";
import { ROOT } from "./helpers/paths.ts";
import { pngs, texts } from "./helpers/results.ts";
import { connectStdio } from "./helpers/stdio_server.ts";

Deno.test('base = "auto" on the CPU provider: the shipped [[derived]] tables widen the fp16 set, which serves generate_image and transform_image', async () => {
  const dir = await Deno.makeTempDir({ prefix: "sd15-derived-set-" });
  try {
    const fixtures = join(ROOT, "tests/fixtures/tiny");
    await copyDir(join(fixtures, "models/sd15-fp16"), join(dir, "models/sd15"));
    const files = parseBuilderLock(await Deno.readTextFile(join(fixtures, "models.lock")))
      .filter((e) => e.path.startsWith("sd15-fp16/"))
      .map((e) => ({ ...e, path: e.path.replace(/^sd15-fp16\//, "sd15/") }));
    const shipped = parseLock(await Deno.readTextFile(join(ROOT, "models.lock")));
    const derived = shipped.derived.filter((d) => d.path.startsWith("sd15-fp32-derived/"));
    assert.equal(derived.length, 6, "text encoder, UNet, both VAEs, tokenizer, scheduler");
    await Deno.writeTextFile(
      join(dir, "models.lock"),
      `${lockText(files)}\n${derived.map(derivedToml).join("\n")}`,
    );
    const config = join(dir, "config.toml");
    await Deno.writeTextFile(
      config,
      `[server]\ndata_dir = ${JSON.stringify(join(dir, "data"))}\n` +
        `[models]\nroot = "models"\n` +
        `[runtime]\nintra_op_threads = 1\ninter_op_threads = 1\n` +
        // The quality preset's models: the set's own VAE decoder, no LoRA.
        `[generation]\npreset = "quality"\nsteps = 2\nseed = 3\n`,
    );

    const session = await connectStdio(["--config", config]);
    try {
      const call = async (name: string, args: Record<string, unknown>) => {
        const result = await session.client.callTool({ name, arguments: args }, undefined, {
          timeout: 300_000,
        });
        assert.equal(result.isError, undefined, texts(result));
        return readPngText(pngs(result)[0]);
      };
      const made = await call("generate_image", { positive_prompt: "a red kite" });
      assert.equal(made.mode, "text_to_image");
      assert.equal(made.preset, "quality");
      const data = new Uint8Array(96 * 96 * 3).map((_, i) => (i * 13) % 256);
      const input = (await encodePng({ width: 96, height: 96, data }, {})).toBase64();
      const changed = await call("transform_image", {
        positive_prompt: "a red kite, watercolour",
        input_image: `data:image/png;base64,${input}`,
      });
      assert.equal(changed.mode, "image_to_image");
      assert.match(session.stderr(), /built derived model files/);
      assert.match(
        session.stderr(),
        /generation: quality preset .*"base":"[^"]*\/sd15-fp32-derived"/,
      );
    } finally {
      await session.close();
    }
    // Every model of the set was widened here, and the records say from what.
    for (const c of ["text_encoder", "unet", "vae_decoder", "vae_encoder"]) {
      const record = await readDerivedRecord(join(dir, "models/sd15-fp32-derived", c));
      assert.equal(record?.recipe.converter, "fp32", c);
      assert.deepEqual(
        record?.recipe.inputs.map((i) => i.path),
        derived.find((d) => d.component === c)!.from,
      );
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
