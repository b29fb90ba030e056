import assert from "node:assert/strict";
import { join } from "node:path";
import { ConfigError, loadConfig } from "./mod.ts";

async function withConfig(text: string, fn: (path: string, dir: string) => Promise<void>) {
  const dir = await Deno.makeTempDir();
  const path = join(dir, "config.toml");
  await Deno.writeTextFile(path, text);
  try {
    await fn(path, dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("[prompt] embeddings: paths under the models root, each called by its stem or its name", async () => {
  await withConfig(
    `[models]\nroot = "m"\n[prompt]\nembeddings = ["embeddings/EasyNegative.safetensors", ` +
      `{ path = "ti/verybad_v1.3.pt" }, { path = "ti/learned_embeds.bin", name = "cat-toy" }]\n`,
    async (path, dir) => {
      const config = await loadConfig({ path, overrides: { transport: "stdio" } });
      assert.deepEqual(config.prompt.embeddings, [
        { path: join(dir, "m", "embeddings", "EasyNegative.safetensors"), name: "EasyNegative" },
        { path: join(dir, "m", "ti", "verybad_v1.3.pt"), name: "verybad_v1.3" },
        { path: join(dir, "m", "ti", "learned_embeds.bin"), name: "cat-toy" },
      ]);
    },
  );
  await withConfig("", async (path) => {
    const config = await loadConfig({ path, overrides: { transport: "stdio" } });
    assert.deepEqual(config.prompt.embeddings, []);
  });
});

Deno.test("[prompt] embeddings: refuses other files, empty names and one word for two files", async () => {
  const refused = async (line: string, pattern: RegExp) => {
    await withConfig(`[prompt]\nembeddings = ${line}\n`, async (path) => {
      await assert.rejects(
        loadConfig({ path, overrides: { transport: "stdio" } }),
        (e: unknown) => e instanceof ConfigError && pattern.test(e.message),
        line,
      );
    });
  };
  await refused(`["x.ckpt"]`, /must be a "\.safetensors", "\.pt" or "\.bin" embedding file/);
  await refused(`[{ path = "a.pt", name = " " }]`, /must be a word the prompt can use/);
  await refused(`[{ path = "a.pt", weight = 1 }]`, /weight/);
  await refused(
    `["a/EasyNegative.safetensors", { path = "b/x.pt", name = "EasyNegative" }]`,
    /\[prompt\] embeddings calls two files "EasyNegative" .*give one of them another name/,
  );
});
