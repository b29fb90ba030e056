import assert from "node:assert/strict";
import { join } from "node:path";
import { ToolError } from "../mcp/tool.ts";
import { compactUtcTimestamp, imageFileName, sanitizeName, savePng, shownPath } from "./mod.ts";

Deno.test("sanitizeName replaces characters outside [A-Za-z0-9_-] with _", () => {
  assert.equal(sanitizeName("my cat/photo.v2"), "my_cat_photo_v2");
  assert.equal(sanitizeName("ok-name_1"), "ok-name_1");
  assert.equal(sanitizeName("café 🐱"), "caf___");
});

Deno.test("sanitizeName cuts to 64 characters", () => {
  const name = sanitizeName("a".repeat(100));
  assert.equal(name, "a".repeat(64));
});

Deno.test("sanitizeName gives no prefix when no letter or digit remains", () => {
  assert.equal(sanitizeName("___---"), null);
  assert.equal(sanitizeName("!!! ..."), null);
  assert.equal(sanitizeName(""), null);
  assert.equal(sanitizeName(null), null);
  assert.equal(sanitizeName(undefined), null);
  // The cut happens first: a digit beyond 64 characters does not count.
  assert.equal(sanitizeName("_".repeat(64) + "7"), null);
});

Deno.test("file names follow {name_}{YYYYMMDD_HHMMSS}_{seed}.png in UTC", () => {
  const date = new Date("2026-03-04T05:06:07.890Z");
  assert.equal(compactUtcTimestamp(date), "20260304_050607");
  assert.equal(imageFileName(null, date, 42), "20260304_050607_42.png");
  assert.equal(imageFileName("cat", date, 4294967295), "cat_20260304_050607_4294967295.png");
});

Deno.test("savePng never overwrites an existing file", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const out = join(dir, "nested", "out");
    const first = await savePng(out, "a_1.png", new Uint8Array([1]));
    const second = await savePng(out, "a_1.png", new Uint8Array([2]));
    const third = await savePng(out, "a_1.png", new Uint8Array([3]));
    assert.equal(first, join(out, "a_1.png"));
    assert.equal(second, join(out, "a_1-2.png"));
    assert.equal(third, join(out, "a_1-3.png"));
    assert.deepEqual(await Deno.readFile(first), new Uint8Array([1]));
    assert.deepEqual(await Deno.readFile(second), new Uint8Array([2]));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("savePng reports an unusable directory as a saving error", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const blocker = join(dir, "file");
    await Deno.writeTextFile(blocker, "not a folder");
    await assert.rejects(savePng(join(blocker, "sub"), "x.png", new Uint8Array([1])), (e) => {
      assert.ok(e instanceof ToolError);
      assert.equal(e.category, "saving");
      assert.match(e.message, /cannot create the output directory \(output\.dir\)/);
      assert.ok(!e.message.includes(dir), `absolute path in: ${e.message}`);
      return true;
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("savePng names an unwritable file relative to output.dir, never the absolute path", async () => {
  const dir = await Deno.makeTempDir();
  try {
    // A name over NAME_MAX (255) fails even for root, and the OS message quotes the full path.
    const name = "c".repeat(300) + ".png";
    await assert.rejects(savePng(dir, name, new Uint8Array([1])), (e) => {
      assert.ok(e instanceof ToolError);
      assert.equal(e.category, "saving");
      assert.match(e.message, /^cannot write output\.dir\/c+\.png: File name too long/);
      assert.ok(!e.message.includes(dir), `absolute path in: ${e.message}`);
      return true;
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("shownPath names a saved file by output.dir and its name only", () => {
  assert.equal(
    shownPath("/srv/sd/outputs/cat_20260304_050607_42-2.png"),
    "output.dir/cat_20260304_050607_42-2.png",
  );
});

Deno.test("savePng refuses a name that would leave output.dir, and writes nothing", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const out = join(dir, "out");
    for (
      const name of ["../x.png", "../../x.png", "a/../../x.png", "/tmp/x.png", "..png", ".png"]
    ) {
      await assert.rejects(savePng(out, name, new Uint8Array([1])), (e) => {
        assert.ok(e instanceof ToolError);
        assert.equal(e.category, "saving");
        assert.match(e.message, /must be one file name inside output\.dir/);
        return true;
      }, name);
    }
    const left = [];
    for await (const entry of Deno.readDir(dir)) left.push(entry.name);
    assert.deepEqual(left, [], "nothing was created");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
