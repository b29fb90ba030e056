/**
 * Start-up checks of the real program: model files against models.lock, and
 * each export flavour of the tiny set served end to end.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { readPngText } from "../mod/image/mod.ts";
import { ROOT } from "./helpers/paths.ts";
import { pngs, texts } from "./helpers/results.ts";
import { connectStdio } from "./helpers/stdio_server.ts";
import { emptyModelsRoot, writeTinyConfig } from "./helpers/tiny_config.ts";
import { teeChildLog } from "./helpers/log_secrets.ts";
import { copyDir } from "./helpers/copy_dir.ts";

async function serveOnce(configPath: string) {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-P=serve", "--quiet", "main.ts", "--config", configPath],
    cwd: ROOT,
    stdin: "null",
    env: { NO_COLOR: "1" },
  }).output();
  teeChildLog("server start-up", output.stderr);
  return output;
}

Deno.test("start-up refuses a model file whose hash is not the lock's", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sd15-startup-" });
  try {
    await copyDir(join(ROOT, "tests/fixtures/tiny/models/sd15"), join(dir, "models/sd15"));
    await Deno.copyFile(join(ROOT, "tests/fixtures/tiny/models.lock"), join(dir, "models.lock"));
    const unet = join(dir, "models/sd15/unet/model.onnx");
    const bytes = await Deno.readFile(unet);
    bytes[bytes.length - 1] ^= 0xff; // same size, different content
    await Deno.writeFile(unet, bytes);
    const config = join(dir, "config.toml");
    await Deno.writeTextFile(
      config,
      `[models]\nroot = "models"\nbase = "sd15"\n[generation]\npreset = "quality"\n`,
    );
    const output = await serveOnce(config);
    const stderr = new TextDecoder().decode(output.stderr);
    assert.notEqual(output.code, 0);
    assert.equal(output.stdout.length, 0);
    assert.match(stderr, /sd15\/unet\/model\.onnx \(\[models\] base = "sd15"\): sha256 is/);
    // A fixture:// entry is rebuilt, not downloaded.
    assert.match(stderr, /deno task fixtures/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("start-up refuses a missing model file and names it", async () => {
  const temp = await writeTinyConfig();
  try {
    await emptyModelsRoot(temp);
    const output = await serveOnce(temp.path);
    const stderr = new TextDecoder().decode(output.stderr);
    assert.notEqual(output.code, 0);
    // Where it was expected, and the config key that needs it.
    const expected = join(temp.dir, "empty", "sd15", "unet", "model.onnx");
    assert.ok(
      stderr.includes(
        `sd15/unet/model.onnx ([models] base = "sd15"): missing; expected at ${expected}`,
      ),
      stderr,
    );
  } finally {
    await temp.remove();
  }
});

for (
  const [base, extra] of [
    ["sd15-optimum", ""],
    ["sd15-optimum-scalar", ""],
    ["sd15-fp16", ""],
    ["sd15-lcm", `scheduler = "lcm"\nguidance_scale = 8.5\n`],
  ]
) {
  Deno.test(`the ${base} export serves generate_image end to end`, async () => {
    const temp = await writeTinyConfig(`[generation]\nsteps = 3\n${extra}`);
    try {
      const text = await Deno.readTextFile(temp.path);
      await Deno.writeTextFile(
        temp.path,
        text.replace("[models]\n", `[models]\nbase = "${base}"\n`),
      );
      const session = await connectStdio(["--config", temp.path]);
      try {
        const result = await session.client.callTool({
          name: "generate_image",
          arguments: { positive_prompt: "a small boat", size: "portrait_512" },
        });
        assert.equal(result.isError, undefined, texts(result));
        const [png] = pngs(result);
        assert.equal(readPngText(png).size, "portrait_512");
      } finally {
        await session.close();
      }
    } finally {
      await temp.remove();
    }
  });
}
