/**
 * An own export, as a user brings it: `deno task models add DIR --write-config`
 * next to the shipped models.lock (the entries and settings go to
 * models.local.lock and config.local.toml), then the real server starts on
 * it and generates — without any of the shipped model files present.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { readPngText } from "../mod/image/mod.ts";
import { readModelsLock } from "../mod/models/mod.ts";
import { modelsTask as runModels } from "./helpers/models_cli.ts";
import { ROOT } from "./helpers/paths.ts";
import { pngs, texts } from "./helpers/results.ts";
import { connectStdio } from "./helpers/stdio_server.ts";
import { copyDir } from "./helpers/copy_dir.ts";

function modelsTask(cwd: string, ...args: string[]) {
  return runModels(cwd, args);
}

Deno.test("an added local set and tiny VAE next to the shipped lock start and generate, shipped files absent", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sd15-own-export-" });
  try {
    await copyDir(join(ROOT, "tests/fixtures/tiny/models/sd15-optimum"), join(dir, "models/own"));
    await Deno.copyFile(join(ROOT, "models.lock"), join(dir, "models.lock"));
    const config = join(dir, "config.toml");
    await Deno.writeTextFile(
      config,
      `[server]\nenvironment = "local"\ndata_dir = ${JSON.stringify(join(dir, "data"))}\n\n` +
        `[models]\nroot = "models"\n\n[runtime]\nintra_op_threads = 1\ninter_op_threads = 1\n\n` +
        `[generation]\npreset = "quality"\nsteps = 2\n`,
    );
    const added = await modelsTask(dir, "add", "models/own", "--write-config");
    assert.equal(added.code, 0, added.stderr);
    // The shipped entries are still in the lock; none of their files exist here.
    const lock = await readModelsLock(join(dir, "models.lock"));
    assert.ok(lock.some((e) => e.path === "sd15/unet/weights.pb"));
    await assert.rejects(Deno.stat(join(dir, "models/sd15")), Deno.errors.NotFound);
    // A tiny VAE decoder of one's own (not the pinned TAESD's conversion): one command locks it
    // and chooses it; the set's own full decoder is then not needed, so it may be gone.
    await copyDir(join(ROOT, "tests/fixtures/tiny/models/taesd"), join(dir, "models/my-taesd"));
    const tiny = await modelsTask(
      dir,
      "add",
      "--component",
      "tiny_vae_decoder",
      "models/my-taesd/vae_decoder/model.onnx",
      "--write-config",
    );
    assert.equal(tiny.code, 0, tiny.stderr);
    const text = await Deno.readTextFile(join(dir, "config.local.toml"));
    assert.match(text, /^tiny_vae_decoder = "my-taesd\/vae_decoder\/model\.onnx"/m);
    assert.match(text, /^vae_decoder = "tiny"/m);
    await Deno.remove(join(dir, "models/own/vae_decoder"), { recursive: true });
    // `deno task models` has nothing to fetch for this config (no network needed).
    const fetched = await modelsTask(dir);
    assert.equal(fetched.code, 0, fetched.stderr);
    // `models check` verifies the tiny decoder, the file the config now names.
    const checked = await modelsTask(dir, "check");
    assert.equal(checked.code, 0, checked.stderr + checked.stdout);
    assert.match(checked.stdout + checked.stderr, /ok\s+my-taesd\/vae_decoder\/model\.onnx/);

    const session = await connectStdio(["--config", config]);
    try {
      const result = await session.client.callTool({
        name: "generate_image",
        arguments: { positive_prompt: "a lighthouse", size: "landscape_512" },
      });
      assert.equal(result.isError, undefined, texts(result));
      const [png] = pngs(result);
      assert.equal(readPngText(png).size, "landscape_512");
    } finally {
      await session.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
