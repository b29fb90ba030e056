/** `[lora] files` in config.toml: resolution and validation messages. */
import { deepStrictEqual, rejects } from "node:assert";
import { join } from "node:path";
import { loadConfig } from "../config/mod.ts";
import { neededFiles } from "../models/mod.ts";

async function withConfig(text: string, fn: (path: string, dir: string) => Promise<void>) {
  const dir = await Deno.makeTempDir({ prefix: "lora_config_" });
  try {
    await Deno.writeTextFile(join(dir, "config.toml"), text);
    await fn(join(dir, "config.toml"), dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("[lora] files: paths resolve under the models root; weight defaults to 1", async () => {
  await withConfig(
    `[models]\nroot = "m"\n[generation]\npreset = "quality"\n` +
      `[lora]\nfiles = [{ path = "lora/a.safetensors", weight = 0.8 }, { path = "lora/b.safetensors" }]\n`,
    async (path, dir) => {
      const config = await loadConfig({ path, env: {} });
      const files = [
        { path: join(dir, "m", "lora/a.safetensors"), weight: 0.8 },
        { path: join(dir, "m", "lora/b.safetensors"), weight: 1 },
      ];
      deepStrictEqual(config.lora, { files });
      // Both must be locked and verified like every model file.
      const needed = neededFiles(config, []).files;
      deepStrictEqual(needed.slice(-2).map((f) => f.abs), files.map((f) => f.path));
      deepStrictEqual(needed.slice(-2).map((f) => f.key.startsWith("[lora] files")), [true, true]);
    },
  );
  // The defaults on the CPU provider: the fast preset's LCM LoRA only.
  deepStrictEqual((await loadConfig({ env: {} })).lora.files.map((f) => f.path), [
    join(Deno.cwd(), "models", "lora/lcm-lora-sdv1-5/pytorch_lora_weights.safetensors"),
  ]);
});

Deno.test("[lora] files: bad entries are refused naming the key and the value", async () => {
  const refused = (toml: string, re: RegExp) =>
    withConfig(toml, (path) => rejects(loadConfig({ path, env: {} }), re));
  await refused(
    `[lora]\nfiles = [{ path = "lora/a.bin" }]\n`,
    /lora\.files\.0\.path: must be a "\.safetensors" file \(got "lora\/a\.bin"\)/,
  );
  await refused(
    `[lora]\nfiles = [{ path = "lora/a.safetensors", weight = "high" }]\n`,
    /lora\.files\.0\.weight: .*expected number.*\(got "high"\)/,
  );
  await refused(
    `[lora]\nfiles = [{ path = "a.safetensors" }, { path = "b.safetensors", weight = 11 }]\n`,
    /lora\.files\.1\.weight: .*\(got 11\)/,
  );
  await refused(
    `[lora]\nfiles = [{ path = "a.safetensors", scale = 1 }]\n`,
    /lora\.files\.0\.scale: unknown key/,
  );
  await refused(`[lora]\nfiles = "a.safetensors"\n`, /lora\.files: .*\(got "a\.safetensors"\)/);
});
