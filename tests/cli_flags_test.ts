/**
 * The program's own flags, run as `deno run -P=serve main.ts` (the same
 * permissions the compiled binary has baked in): `--version` and `--check`.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import manifest from "../deno.json" with { type: "json" };
import { ROOT, TINY_CONFIG } from "./helpers/paths.ts";
import { writeTinyConfig } from "./helpers/tiny_config.ts";

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs main.ts with `args`, stdin left open (a server would wait on it), and
 * kills it after 60 s so that a flag that is ignored fails the test instead
 * of hanging it.
 */
async function run(args: string[]): Promise<Run> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-P=serve", "--quiet", "main.ts", ...args],
    cwd: ROOT,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).spawn();
  const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
  try {
    const output = await child.output();
    return {
      code: output.code,
      stdout: new TextDecoder().decode(output.stdout),
      stderr: new TextDecoder().decode(output.stderr),
    };
  } finally {
    clearTimeout(timer);
  }
}

Deno.test("--version prints the deno.json version and reads no config", async () => {
  const out = await run(["--version", "--config", "/nonexistent/config.toml"]);
  assert.equal(out.code, 0, out.stderr);
  assert.equal(
    out.stdout,
    `generate-image-sd15-mcp ${manifest.version} (deno ${Deno.version.deno}, v8 ${Deno.version.v8})\n`,
  );
  const short = await run(["-V"]);
  assert.equal(short.stdout, out.stdout);
});

Deno.test("--check verifies config, model files, engine and codec, then exits", async () => {
  const out = await run(["--check", "--config", TINY_CONFIG]);
  assert.equal(out.code, 0, out.stderr);
  const lines = out.stdout.trimEnd().split("\n");
  assert.equal(lines.length, 4, out.stdout);
  assert.match(lines[0], /^config ok: transport stdio/);
  assert.match(lines[1], /^model files ok: .*models\.lock/);
  assert.match(
    lines[2],
    /^engine ok: \d+ ONNX models loaded \(ControlNets: depth, openpose, inpaint\); execution provider cpu$/,
  );
  assert.match(lines[3], /^image codec ok: sharp encoded a \d+-byte PNG/);
  assert.doesNotMatch(out.stderr, /serving/, "no transport was started");
});

Deno.test("--check fails (exit 1) on a model file that does not match the lock, naming it", async () => {
  const temp = await writeTinyConfig();
  try {
    const models = join(temp.dir, "models");
    await Deno.mkdir(join(models, "sd15/text_encoder"), { recursive: true });
    const text = await Deno.readTextFile(temp.path);
    // The base text encoder replaced by a same-sized file of other bytes, the rest left missing.
    const source = join(ROOT, "tests/fixtures/tiny/models/sd15/text_encoder/model.onnx");
    const bytes = await Deno.readFile(source);
    bytes[bytes.length - 1] ^= 0xff;
    await Deno.writeFile(join(models, "sd15/text_encoder/model.onnx"), bytes);
    await Deno.writeTextFile(
      temp.path,
      // base named: "auto" would pick the derived fp32 set, which this lock does not declare.
      text.replace(/root = .*/, `root = ${JSON.stringify(models)}\nbase = "sd15"`),
    );
    const out = await run(["--check", "--config", temp.path]);
    assert.equal(out.code, 1, out.stderr);
    assert.match(out.stderr, /check failed:/);
    assert.match(out.stderr, /sd15\/text_encoder\/model\.onnx/);
    // The fix fits the lock entry: fixtures for the test-sized set, a download for pinned files.
    assert.match(out.stderr, /run `deno task (fixtures|models)/);
    assert.equal(out.stdout.split("\n")[0].startsWith("config ok"), false, "nothing printed as ok");
  } finally {
    await temp.remove();
  }
});

Deno.test("--check fails (exit 2) on an invalid config, naming the key", async () => {
  const temp = await writeTinyConfig("[generation]\nsteps = 0\n");
  try {
    const out = await run(["--check", "--config", temp.path]);
    assert.equal(out.code, 2, out.stderr);
    assert.match(out.stderr, /generation\.steps/);
    assert.equal(out.stdout, "");
  } finally {
    await temp.remove();
  }
});
