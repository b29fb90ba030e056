/**
 * `deno task compile` as a user runs it. Where the real runtime (denort) is
 * missing, the task must fail in one line; the deno CLI given as `DENORT_BIN`
 * is refused before compiling (it answers `--version`, denort does not); the
 * full compile is exercised with `/bin/false` as `DENORT_BIN`, which
 * `deno compile` accepts but which cannot run the embedded program, so the
 * task's smoke test (`--version`) must catch it, again in one line.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { ROOT } from "./helpers/paths.ts";

async function task(args: string[], env: Record<string, string>) {
  const output = await new Deno.Command("deno", {
    args: ["task", "--quiet", "compile", ...args],
    cwd: ROOT,
    env: { NO_COLOR: "1", ...env },
    stdin: "null",
  }).output();
  const text = (bytes: Uint8Array) =>
    new TextDecoder().decode(bytes).split("\n").filter((line) => line !== "");
  return { code: output.code, stdout: text(output.stdout), stderr: text(output.stderr) };
}

Deno.test("compile --dry-run shows the flags the task passes to deno compile", async () => {
  const out = await task(["--dry-run"], { DENORT_BIN: "/bin/false" });
  assert.equal(out.code, 0, out.stderr.join("\n"));
  assert.equal(out.stdout[0], "# runtime from DENORT_BIN=/bin/false");
  const command = out.stdout[1];
  assert.match(command, /^deno compile -P=serve --frozen --self-extracting /);
  assert.match(command, / --include mod\/pipeline\/worker\.ts /);
  assert.match(command, / --output dist\/generate-image-sd15-mcp main\.ts$/);
  // Other platforms' onnxruntime binaries stay out; this platform's stay in.
  assert.match(command, /--exclude \S+onnxruntime-node\/bin\/napi-v6\/win32\/x64/);
  const here = Deno.build.os === "windows" ? "win32" : Deno.build.os;
  const arch = Deno.build.arch === "x86_64" ? "x64" : "arm64";
  assert.doesNotMatch(command, new RegExp(`napi-v6/${here}/${arch}\\b`));
});

Deno.test("compile: a DENORT_BIN that is not there fails in one line saying how", async () => {
  const out = await task([], { DENORT_BIN: "/nonexistent/denort" });
  assert.equal(out.code, 1);
  assert.equal(out.stdout.length, 0);
  assert.equal(out.stderr.length, 1, out.stderr.join("\n"));
  assert.match(
    out.stderr[0],
    /^deno task compile: DENORT_BIN=\/nonexistent\/denort is not a file; /,
  );
  assert.match(out.stderr[0], /denort-\S+\.zip/);
  assert.doesNotMatch(out.stderr[0], /Stack backtrace|^\s+at /i);
});

Deno.test("compile: the deno CLI as DENORT_BIN is refused in one line, before compiling", async () => {
  const out = await task([], { DENORT_BIN: Deno.execPath() });
  assert.equal(out.code, 1, out.stderr.join("\n"));
  assert.equal(out.stderr.length, 1, out.stderr.join("\n"));
  assert.match(
    out.stderr[0],
    /^deno task compile: DENORT_BIN=\S+ is not denort: it answers `--version` \(exit 0, "deno \d/,
  );
  assert.match(out.stderr[0], /denort-\S+\.zip/);
  // Before compiling: deno compile, once started, prints its own lines (the one line above is
  // all there is).
});

Deno.test("compile: a runtime that cannot run the program is caught by the smoke test", async () => {
  // An executable that deno compile accepts and that answers --version with exit 1, as denort
  // does, but that is no Deno runtime: only running the result can tell.
  const dir = join("dist", `.test-${crypto.randomUUID()}`);
  const output = join(dir, "generate-image-sd15-mcp");
  try {
    const out = await task(["--output", output], { DENORT_BIN: "/bin/false" });
    assert.equal(out.code, 1, out.stderr.join("\n"));
    const last = out.stderr.at(-1)!;
    assert.match(last, /^deno task compile: the compiled binary does not run \(--version: /);
    assert.match(last, /removed it/);
    assert.match(last, /must be the denort of Deno/);
    await assert.rejects(Deno.stat(join(ROOT, output)), Deno.errors.NotFound);
  } finally {
    await Deno.remove(join(ROOT, dir), { recursive: true }).catch(() => {});
  }
});
