import assert from "node:assert/strict";
import { join } from "node:path";
import {
  assertLorasListedOnce,
  fileIdentity,
  findRepeatedLoras,
  RepeatedLoraError,
} from "./repeated.ts";
import { LoraError } from "./lora_set.ts";

async function withFiles(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "lora-repeated-" });
  try {
    await Deno.mkdir(join(dir, "lora"));
    await Deno.writeTextFile(join(dir, "lora/a.safetensors"), "a");
    await Deno.writeTextFile(join(dir, "lora/b.safetensors"), "b");
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("findRepeatedLoras: by path, by file, by content; distinct LoRAs pass", () => {
  const files = ["/m/a", "/m/b", "/m/a", "/m/c", "/m/d", "/m/e"].map((path) => ({ path }));
  const ids = [
    { file: "1:10", sha256: "aa" },
    { file: "1:11", sha256: "bb" },
    { file: "1:10", sha256: "aa" },
    { file: "1:12", sha256: "cc" },
    { file: "1:12", sha256: "cc" }, // a link to c
    { file: "1:13", sha256: "bb" }, // a copy of b
  ];
  assert.deepEqual(findRepeatedLoras(files, ids), [
    { indexes: [0, 2], why: "the same path, the same file, the same content (sha256 aa…)" },
    { indexes: [1, 5], why: "the same content (sha256 bb…)" },
    { indexes: [3, 4], why: "the same file, the same content (sha256 cc…)" },
  ]);
  assert.deepEqual(findRepeatedLoras(files.slice(0, 2), ids.slice(0, 2)), []);
  // Unknown identities join nothing.
  assert.deepEqual(findRepeatedLoras([{ path: "/x" }, { path: "/y" }], [{}, {}]), []);
});

Deno.test("findRepeatedLoras: a chain of reasons makes one group", () => {
  const files = [{ path: "/m/a" }, { path: "/m/b" }, { path: "/m/a" }];
  const ids = [{ sha256: "11" }, { sha256: "22" }, { sha256: "22" }];
  const groups = findRepeatedLoras(files, ids);
  assert.equal(groups.length, 1);
  assert.deepEqual(groups[0].indexes, [0, 1, 2]);
  assert.match(groups[0].why, /the same path/);
  assert.match(groups[0].why, /the same content \(sha256 22…\)/);
});

Deno.test("fileIdentity: a symbolic and a hard link are the file they point to", async () => {
  await withFiles(async (dir) => {
    const a = join(dir, "lora/a.safetensors");
    await Deno.symlink(a, join(dir, "lora/sym.safetensors"));
    await Deno.link(a, join(dir, "lora/hard.safetensors"));
    const id = await fileIdentity(a);
    assert.ok(id);
    assert.equal(await fileIdentity(join(dir, "lora/sym.safetensors")), id);
    assert.equal(await fileIdentity(join(dir, "lora/hard.safetensors")), id);
    assert.notEqual(await fileIdentity(join(dir, "lora/b.safetensors")), id);
    assert.equal(await fileIdentity(join(dir, "lora/none.safetensors")), undefined);
  });
});

Deno.test("assertLorasListedOnce: refuses a repeat, naming both entries, weights and the fix", async () => {
  await withFiles(async (dir) => {
    const a = join(dir, "lora/a.safetensors");
    const b = join(dir, "lora/b.safetensors");
    const link = join(dir, "lora/link.safetensors");
    await Deno.symlink(a, link);
    await assertLorasListedOnce([{ path: a }, { path: b, weight: 0.5 }], { root: dir });
    await assertLorasListedOnce([{ path: a }], { root: dir });

    const error = await assertLorasListedOnce(
      [{ path: link, weight: 0.8 }, { path: b }, { path: a, weight: 1 }],
      { root: dir },
    ).then(() => undefined, (e) => e);
    assert.ok(error instanceof RepeatedLoraError);
    assert.ok(error instanceof LoraError, "a LoRA problem, like the other LoRA errors");
    assert.deepEqual(error.repeats, [{ indexes: [0, 2], why: "the same file" }]);
    assert.match(
      error.message,
      /lora\/link\.safetensors \(entry 1 of 3, weight 0\.8\) and lora\/a\.safetensors \(entry 3 of 3, weight 1\): the same file; it would be merged 2 times \(weights adding up to 1\.8\)/,
    );
    assert.match(error.message, /remove the repeat from \[lora\] files/);
    assert.match(error.message, /\[models\] lcm_lora/);
  });
});

Deno.test("assertLorasListedOnce: the same content pinned under two paths is one LoRA", async () => {
  await withFiles(async (dir) => {
    const a = join(dir, "lora/a.safetensors");
    const copy = join(dir, "lora/copy.safetensors");
    await Deno.copyFile(a, copy);
    const sha = new Map([[a, "ab".repeat(32)], [copy, "ab".repeat(32)]]);
    await assertLorasListedOnce([{ path: a }, { path: copy }], { root: dir });
    await assert.rejects(
      assertLorasListedOnce([{ path: a }, { path: copy }], {
        root: dir,
        sha256Of: (p) => sha.get(p),
      }),
      /lora\/a\.safetensors \(entry 1 of 2, weight 1\) and lora\/copy\.safetensors \(entry 2 of 2, weight 1\): the same content \(sha256 abababababab…\)/,
    );
  });
});
