import assert from "node:assert/strict";
import { join } from "node:path";
import { ConfigError, loadConfig } from "./mod.ts";
import { localOverlayPath, mergeTables } from "./overlay.ts";

Deno.test("localOverlayPath: .local before the extension, in the same folder", () => {
  assert.equal(localOverlayPath("/etc/sd15/config.toml"), "/etc/sd15/config.local.toml");
  assert.equal(localOverlayPath("models.lock"), "models.local.lock");
  assert.equal(localOverlayPath("a/worker"), "a/worker.local");
});

Deno.test("mergeTables: tables merge at every depth, other values replace", () => {
  assert.deepEqual(
    mergeTables(
      { models: { base: "auto", root: "models" }, lora: { files: [{ path: "a" }] }, x: 1 },
      { models: { base: "own" }, lora: { files: [] }, controlnet: { depth: { enabled: true } } },
    ),
    {
      models: { base: "own", root: "models" },
      lora: { files: [] },
      x: 1,
      controlnet: { depth: { enabled: true } },
    },
  );
});

Deno.test("config.local.toml is read over config.toml; its bad keys are named with it", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = join(dir, "config.toml");
    await Deno.writeTextFile(
      path,
      `[models]\nroot = "m"\nbase = "sd15"\n[generation]\nsteps = 30\n`,
    );
    const plain = await loadConfig({ path, env: {} });
    assert.equal(plain.models.base, join(dir, "m/sd15"));

    const overlay = join(dir, "config.local.toml");
    await Deno.writeTextFile(
      overlay,
      `[models]\nbase = "own"\n[controlnet.depth]\nenabled = true\n`,
    );
    const merged = await loadConfig({ path, env: {} });
    // The overlay's keys win; the file's others stay; relative paths resolve in the same folder.
    assert.equal(merged.models.base, join(dir, "m/own"));
    assert.equal(merged.models.root, join(dir, "m"));
    assert.equal(merged.generation.steps, 30);
    assert.equal(merged.controlnet.depth.enabled, true);

    await Deno.writeTextFile(overlay, `[generation]\nsteps = 0\nnope = 1\n`);
    await assert.rejects(loadConfig({ path, env: {} }), (error: unknown) => {
      assert.ok(error instanceof ConfigError);
      assert.match(error.message, new RegExp(`^invalid config ${path} \\+ ${overlay}:`));
      assert.match(error.message, new RegExp(`generation\\.nope: unknown key \\[in ${overlay}\\]`));
      assert.match(
        error.message,
        new RegExp(`generation\\.steps: .* \\(got 0\\) \\[in ${overlay}\\]`),
      );
      return true;
    });
    await Deno.writeTextFile(overlay, `[generation\n`);
    await assert.rejects(
      loadConfig({ path, env: {} }),
      (error: Error) => error.message.startsWith(`${overlay}: invalid TOML`),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
