import { deepStrictEqual, ok, rejects, strictEqual } from "node:assert";
import { createHash } from "node:crypto";
import { join } from "node:path";
import type { LockEntry } from "./lock.ts";
import { sha256File } from "../bytes/mod.ts";
import { checkModelFiles, ModelFilesError, verifyModelFiles } from "./verify.ts";

const enc = new TextEncoder();
const A = enc.encode("the real model bytes\n");
const B = enc.encode("other model bytes...\n"); // same length as A, other content
const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

function entry(path: string, bytes: Uint8Array): LockEntry {
  return { component: "unet", path, url: "fixture://x", size: bytes.length, sha256: sha(bytes) };
}

/** A root with files, and a hash function that counts full hashes. */
async function setup(files: Record<string, Uint8Array>) {
  const root = await Deno.makeTempDir({ prefix: "models_verify_" });
  for (const [path, bytes] of Object.entries(files)) {
    await Deno.mkdir(join(root, path, ".."), { recursive: true });
    await Deno.writeFile(join(root, path), bytes);
  }
  const hashed: string[] = [];
  const hashFile = (p: string) => {
    hashed.push(p);
    return sha256File(p);
  };
  return { root, hashed, hashFile, cleanup: () => Deno.remove(root, { recursive: true }) };
}

Deno.test("verify: all good, then a cache hit does not re-hash", async () => {
  strictEqual(A.length, B.length);
  const s = await setup({ "sd15/unet/model.onnx": A });
  try {
    const entries = [entry("sd15/unet/model.onnx", A)];
    const first = await verifyModelFiles({ root: s.root, entries, hashFile: s.hashFile });
    deepStrictEqual(first.hashed, ["sd15/unet/model.onnx"]);
    strictEqual(s.hashed.length, 1);
    const second = await verifyModelFiles({ root: s.root, entries, hashFile: s.hashFile });
    deepStrictEqual(second.cached, ["sd15/unet/model.onnx"]);
    deepStrictEqual(second.hashed, []);
    strictEqual(s.hashed.length, 1, "second start must not hash again");
  } finally {
    await s.cleanup();
  }
});

Deno.test("verify: missing, wrong size and wrong sha256 are each named", async () => {
  const s = await setup({ "b.onnx": enc.encode("short"), "c.onnx": B });
  try {
    const entries = [entry("a.onnx", A), entry("b.onnx", A), entry("c.onnx", A)];
    await rejects(
      verifyModelFiles({ root: s.root, entries, hashFile: s.hashFile }),
      ModelFilesError,
    );
    const result = await checkModelFiles({ root: s.root, entries, hashFile: s.hashFile });
    deepStrictEqual(result.problems.map((p) => [p.path, p.kind]), [
      ["a.onnx", "missing"],
      ["b.onnx", "size"],
      ["c.onnx", "sha256"],
    ]);
    strictEqual(result.problems[0].message, "a.onnx: missing");
    strictEqual(result.problems[1].message, `b.onnx: size is 5 bytes, expected ${A.length} bytes`);
    strictEqual(result.problems[2].message, `c.onnx: sha256 is ${sha(B)}, expected ${sha(A)}`);
    let message = "";
    try {
      await verifyModelFiles({ root: s.root, entries, hashFile: s.hashFile });
    } catch (e) {
      ok(e instanceof ModelFilesError);
      strictEqual(e.problems.length, 3);
      message = e.message;
    }
    ok(message.includes("  a.onnx: missing\n"), message);
    ok(message.includes(`c.onnx: sha256 is ${sha(B)}, expected ${sha(A)}`), message);
    ok(message.endsWith("run `deno task models`"), message);
  } finally {
    await s.cleanup();
  }
});

Deno.test("verify: a planted cache record is trusted while size and mtime match", async () => {
  // The file holds B, but the cache claims the content hashed to sha(A) at this
  // size and mtime. Passing proves the check used the cache, not the bytes.
  const s = await setup({ "m.onnx": B });
  try {
    const stat = await Deno.stat(join(s.root, "m.onnx"));
    const cacheFile = join(s.root, ".verified.json");
    await Deno.writeTextFile(
      cacheFile,
      JSON.stringify({
        version: 1,
        files: { "m.onnx": { size: B.length, mtimeMs: stat.mtime!.getTime(), sha256: sha(A) } },
      }),
    );
    const result = await verifyModelFiles({
      root: s.root,
      entries: [entry("m.onnx", A)],
      cacheFile,
      hashFile: s.hashFile,
    });
    deepStrictEqual(result.cached, ["m.onnx"]);
    strictEqual(s.hashed.length, 0);
  } finally {
    await s.cleanup();
  }
});

Deno.test("verify: a changed mtime forces a re-hash (and catches the change)", async () => {
  const s = await setup({ "m.onnx": A });
  try {
    const entries = [entry("m.onnx", A)];
    await verifyModelFiles({ root: s.root, entries, hashFile: s.hashFile });
    strictEqual(s.hashed.length, 1);
    // Same size, different bytes, new mtime: must be hashed again and rejected.
    const path = join(s.root, "m.onnx");
    await Deno.writeFile(path, B);
    await Deno.utime(path, new Date(), new Date(Date.now() + 5000));
    const result = await checkModelFiles({ root: s.root, entries, hashFile: s.hashFile });
    strictEqual(s.hashed.length, 2);
    deepStrictEqual(result.problems.map((p) => p.kind), ["sha256"]);
    // Only touching the mtime (content intact) also re-hashes, then passes.
    await Deno.writeFile(path, A);
    await Deno.utime(path, new Date(), new Date(Date.now() + 10_000));
    const again = await verifyModelFiles({ root: s.root, entries, hashFile: s.hashFile });
    deepStrictEqual(again.hashed, ["m.onnx"]);
    strictEqual(s.hashed.length, 3);
  } finally {
    await s.cleanup();
  }
});

Deno.test("verify: a corrupt cache file only costs a re-hash", async () => {
  const s = await setup({ "m.onnx": A });
  try {
    await Deno.writeTextFile(join(s.root, ".verified.json"), "{oops");
    const result = await verifyModelFiles({
      root: s.root,
      entries: [entry("m.onnx", A)],
      hashFile: s.hashFile,
    });
    deepStrictEqual(result.hashed, ["m.onnx"]);
    const cache = JSON.parse(await Deno.readTextFile(join(s.root, ".verified.json")));
    strictEqual(cache.files["m.onnx"].sha256, sha(A));
  } finally {
    await s.cleanup();
  }
});
