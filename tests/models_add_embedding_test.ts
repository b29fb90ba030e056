/**
 * `deno task models add --component embedding FILE`: the file is read as the server reads it
 * (one `[n, width]` tensor), locked in models.local.lock, and joins `[prompt] embeddings` as the
 * user wrote it; `models check` then verifies it like every model. Files that are not an SD 1.x
 * embedding are refused with the reason and nothing is written.
 */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { loadConfig } from "../mod/config/mod.ts";
import { torchFileBytes } from "../mod/checkpoint/testing.ts";
import { encodeSafetensors } from "./fixtures/builder/lora.ts";
import { modelsTask } from "./helpers/models_cli.ts";

function embedding(name: string, shape: number[]): Uint8Array {
  const n = shape.reduce((a, b) => a * b, 1);
  const data = Float32Array.from({ length: n }, (_, i) => ((i % 17) - 8) / 16);
  return encodeSafetensors([{ name, dtype: "F32", shape, data }]);
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}

Deno.test("models add --component embedding: locks the file and lists it in [prompt] embeddings", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sd15-add-embedding-" });
  try {
    await Deno.writeTextFile(join(dir, "config.toml"), `[models]\nroot = "models"\n`);
    await Deno.writeTextFile(join(dir, "models.lock"), "");
    await Deno.mkdir(join(dir, "models", "embeddings"), { recursive: true });
    const easy = embedding("emb_params", [3, 768]);
    await Deno.writeFile(join(dir, "models/embeddings/EasyNegative.safetensors"), easy);
    await Deno.writeFile(
      join(dir, "models/embeddings/learned_embeds.safetensors"),
      embedding("<cat-toy>", [768]),
    );
    // AUTOMATIC1111's .pt, read through the pickle-free reader.
    await Deno.writeFile(
      join(dir, "models/embeddings/bad-hands-5.pt"),
      await torchFileBytes({
        dict: [
          ["string_to_token", { dict: [["*", 265]] }],
          [
            "string_to_param",
            {
              dict: [["*", {
                tensor: { dtype: "F32", shape: [2, 768], data: new Float32Array(1536) },
                parameter: true,
              }]],
            },
          ],
          ["name", "bad-hands-5"],
        ],
      }),
    );

    // Without --write-config: the lines to paste.
    const printed = await modelsTask(dir, [
      "add",
      "--component",
      "embedding",
      "models/embeddings/EasyNegative.safetensors",
    ]);
    assert.equal(printed.code, 0, printed.stderr);
    assert.match(printed.stdout, /^\[prompt\]$/m);
    assert.match(printed.stdout, /^embeddings = \["embeddings\/EasyNegative\.safetensors"\]$/m);
    const lock = await Deno.readTextFile(join(dir, "models.local.lock"));
    assert.match(lock, /component = "embedding"/);
    assert.match(lock, /path = "embeddings\/EasyNegative\.safetensors"/);
    assert.ok(lock.includes(createHash("sha256").update(easy).digest("hex")), lock);

    // Written: the user's own entry (with its name) stays, the new file joins it, and adding
    // a file already listed changes nothing.
    await Deno.writeTextFile(
      join(dir, "config.local.toml"),
      `[prompt]\nembeddings = [{ path = "embeddings/EasyNegative.safetensors", name = "easyneg" }]\n`,
    );
    for (
      const file of [
        "learned_embeds.safetensors",
        "bad-hands-5.pt",
        "learned_embeds.safetensors",
      ]
    ) {
      const written = await modelsTask(dir, [
        "add",
        "--component",
        "embedding",
        `models/embeddings/${file}`,
        "--write-config",
      ]);
      assert.equal(written.code, 0, written.stderr);
    }
    const config = await loadConfig({
      path: join(dir, "config.toml"),
      overrides: { transport: "stdio" },
    });
    assert.deepEqual(config.prompt.embeddings, [
      { path: join(dir, "models/embeddings/EasyNegative.safetensors"), name: "easyneg" },
      { path: join(dir, "models/embeddings/learned_embeds.safetensors"), name: "learned_embeds" },
      { path: join(dir, "models/embeddings/bad-hands-5.pt"), name: "bad-hands-5" },
    ]);

    // `models check` verifies the configured embeddings like every model file.
    const check = await modelsTask(dir, ["check"]);
    assert.match(check.stdout, /^ok\s+embeddings\/EasyNegative\.safetensors$/m);
    assert.match(check.stdout, /^ok\s+embeddings\/learned_embeds\.safetensors$/m);
    assert.match(check.stdout, /^ok\s+embeddings\/bad-hands-5\.pt$/m);
    await Deno.writeFile(
      join(dir, "models/embeddings/EasyNegative.safetensors"),
      embedding("emb_params", [2, 768]),
    );
    const changed = await modelsTask(dir, ["check"]);
    assert.match(changed.stdout, /^wrong size\s+embeddings\/EasyNegative\.safetensors/m);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("models add --component embedding: refuses what is not an SD 1.x embedding, writing nothing", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sd15-add-embedding-bad-" });
  try {
    await Deno.writeTextFile(join(dir, "config.toml"), `[models]\nroot = "models"\n`);
    await Deno.writeTextFile(join(dir, "models.lock"), "");
    await Deno.mkdir(join(dir, "models"), { recursive: true });
    await Deno.writeFile(
      join(dir, "models/xl.safetensors"),
      encodeSafetensors([
        { name: "clip_g", dtype: "F32", shape: [1, 4], data: new Float32Array(4) },
        { name: "clip_l", dtype: "F32", shape: [1, 4], data: new Float32Array(4) },
      ]),
    );
    await Deno.writeFile(
      join(dir, "models/two.pt"),
      await torchFileBytes({
        dict: [[
          "string_to_param",
          {
            dict: [
              ["*", { tensor: { dtype: "F32", shape: [1, 4], data: new Float32Array(4) } }],
              ["+", { tensor: { dtype: "F32", shape: [1, 4], data: new Float32Array(4) } }],
            ],
          },
        ]],
      }),
    );
    const cases: Array<[string, RegExp]> = [
      ["models/xl.safetensors", /xl\.safetensors: an SDXL embedding/],
      ["models/two.pt", /two\.pt: the embedding file has multiple terms in it/],
    ];
    for (const [file, reason] of cases) {
      const run = await modelsTask(dir, ["add", "--component", "embedding", file]);
      assert.notEqual(run.code, 0, file);
      assert.match(run.stderr, reason);
      assert.match(run.stderr, /nothing was written/);
    }
    assert.equal(await exists(join(dir, "models.local.lock")), false);
    assert.equal(await exists(join(dir, "config.local.toml")), false);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
