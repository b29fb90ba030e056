/**
 * An own export, as a user brings it: `deno task models add DIR --write-config`
 * next to the shipped models.lock, then the real server starts on it and
 * generates — without any of the shipped model files present.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { readPngText } from "../mod/image/mod.ts";
import { readModelsLock } from "../mod/models/mod.ts";
import { ROOT } from "./helpers/paths.ts";
import { pngs, texts } from "./helpers/results.ts";
import { connectStdio } from "./helpers/stdio_server.ts";

async function copyDir(from: string, to: string) {
  await Deno.mkdir(to, { recursive: true });
  for await (const entry of Deno.readDir(from)) {
    if (entry.isDirectory) await copyDir(join(from, entry.name), join(to, entry.name));
    else if (entry.isFile) await Deno.copyFile(join(from, entry.name), join(to, entry.name));
  }
}

async function modelsTask(cwd: string, ...args: string[]) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--config",
      join(ROOT, "deno.json"),
      "-P=models",
      "--quiet",
      join(ROOT, "mod/models/cli.ts"),
      ...args,
    ],
    cwd,
    stdin: "null",
    env: { NO_COLOR: "1" },
  }).output();
  return { code: out.code, stderr: new TextDecoder().decode(out.stderr) };
}

Deno.test("an added local set next to the shipped lock starts and generates, shipped files absent", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sd15-own-export-" });
  try {
    await copyDir(join(ROOT, "tests/fixtures/tiny/models/sd15-optimum"), join(dir, "models/own"));
    await Deno.copyFile(join(ROOT, "models.lock"), join(dir, "models.lock"));
    const config = join(dir, "config.toml");
    await Deno.writeTextFile(
      config,
      `[server]\nenvironment = "local"\ndata_dir = ${JSON.stringify(join(dir, "data"))}\n\n` +
        `[models]\nroot = "models"\n\n[runtime]\nintra_op_threads = 1\ninter_op_threads = 1\n\n` +
        `[generation]\nsteps = 2\n`,
    );
    const added = await modelsTask(dir, "add", "models/own", "--write-config");
    assert.equal(added.code, 0, added.stderr);
    // The shipped entries are still in the lock; none of their files exist here.
    const lock = await readModelsLock(join(dir, "models.lock"));
    assert.ok(lock.some((e) => e.path === "sd15/unet/weights.pb"));
    await assert.rejects(Deno.stat(join(dir, "models/sd15")), Deno.errors.NotFound);
    // `deno task models` has nothing to fetch for this config (no network needed).
    const fetched = await modelsTask(dir);
    assert.equal(fetched.code, 0, fetched.stderr);

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
