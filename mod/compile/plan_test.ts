import assert from "node:assert/strict";
import { join } from "node:path";
import { binaryPathFor, compileArgs, foreignNativePackages, nodePlatformOf } from "./plan.ts";

Deno.test("plan: target triples map to Node's platform names", () => {
  assert.deepEqual(nodePlatformOf("x86_64-unknown-linux-gnu"), {
    os: "linux",
    arch: "x64",
    libc: "gnu",
  });
  assert.deepEqual(nodePlatformOf("aarch64-apple-darwin"), { os: "darwin", arch: "arm64" });
  assert.deepEqual(nodePlatformOf("x86_64-pc-windows-msvc"), { os: "win32", arch: "x64" });
  assert.throws(() => nodePlatformOf("riscv64gc-unknown-linux-gnu"), /unknown target/);
  assert.equal(binaryPathFor("x86_64-pc-windows-msvc"), "dist/generate-image-sd15-mcp.exe");
});

Deno.test("plan: serve permissions, the worker module, self-extracting, excludes", () => {
  const args = compileArgs("x86_64-unknown-linux-gnu", ["node_modules/a", "node_modules/b"]);
  assert.deepEqual(args, [
    "compile",
    "-P=serve",
    "--frozen",
    "--self-extracting",
    "--include",
    "mod/pipeline/worker.ts",
    "--exclude",
    "node_modules/a",
    "--exclude",
    "node_modules/b",
    "--output",
    "dist/generate-image-sd15-mcp",
    "main.ts",
  ]);
});

Deno.test("plan: only the target's native packages are kept", async () => {
  const root = await Deno.makeTempDir({ prefix: "sd15-plan-" });
  try {
    const store = join(root, "node_modules/.deno");
    const ort = "onnxruntime-node@1.30.0/node_modules/onnxruntime-node/bin/napi-v6";
    for (
      const dir of [
        `${ort}/linux/x64`,
        `${ort}/linux/arm64`,
        `${ort}/darwin/arm64`,
        `${ort}/win32/x64`,
        "@img+sharp-linux-x64@0.35.5",
        "@img+sharp-linuxmusl-x64@0.35.5",
        "@img+sharp-libvips-linux-x64@1.3.4",
        "@img+sharp-libvips-linuxmusl-x64@1.3.4",
        "@img+colour@1.1.0",
        "sharp@0.35.5",
      ]
    ) await Deno.mkdir(join(store, dir), { recursive: true });
    const gnu = await foreignNativePackages(root, "x86_64-unknown-linux-gnu");
    assert.deepEqual(gnu.sort(), [
      "node_modules/.deno/@img+sharp-libvips-linuxmusl-x64@1.3.4",
      "node_modules/.deno/@img+sharp-linuxmusl-x64@0.35.5",
      `node_modules/.deno/${ort}/darwin/arm64`,
      `node_modules/.deno/${ort}/linux/arm64`,
      `node_modules/.deno/${ort}/win32/x64`,
    ]);
    const mac = await foreignNativePackages(root, "aarch64-apple-darwin");
    assert.ok(!mac.includes(`node_modules/.deno/${ort}/darwin/arm64`));
    assert.ok(mac.includes(`node_modules/.deno/${ort}/linux/x64`));
    assert.ok(mac.includes("node_modules/.deno/@img+sharp-linux-x64@0.35.5"));
    assert.deepEqual(await foreignNativePackages(join(root, "none"), "aarch64-apple-darwin"), []);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});
