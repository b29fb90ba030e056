import { deepStrictEqual, match, ok, strictEqual } from "node:assert";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { main } from "./cli.ts";
import { startFixtureServer } from "../../tests/helpers/fixture_server.ts";
import { modelsTask } from "../../tests/helpers/models_cli.ts";

Deno.test("cli: downloads what the lock lists, then finds it present", async () => {
  const content = new TextEncoder().encode("scheduler config bytes");
  const sha = createHash("sha256").update(content).digest("hex");
  const dir = await Deno.makeTempDir({ prefix: "models_cli_" });
  const server = await startFixtureServer(content);
  try {
    const lock = join(dir, "models.lock");
    await Deno.writeTextFile(
      lock,
      `[[file]]\ncomponent = "scheduler"\npath = "sd15/scheduler/scheduler_config.json"\n` +
        `url = "${server.url}"\nsize = ${content.length}\nsha256 = "${sha}"\n\n` +
        `[[file]]\ncomponent = "depth"\npath = "annotators/depth.onnx"\n` +
        `url = "${server.url}"\nsize = 1\nsha256 = "${"0".repeat(64)}"\n`,
    );
    const root = join(dir, "models");
    strictEqual(await main(["--all", "--lock", lock, "--root", root, "--only", "scheduler"]), 0);
    deepStrictEqual(
      await Deno.readFile(join(root, "sd15/scheduler/scheduler_config.json")),
      content,
    );
    strictEqual(server.requests.length, 1);
    strictEqual(await main(["--all", "--lock", lock, "--root", root, "--only", "scheduler"]), 0);
    strictEqual(server.requests.length, 1, "second run finds the file present");
    // The depth entry's size disagrees with what the server sends: exit 1.
    strictEqual(await main(["--all", "--lock", lock, "--root", root, "--only", "depth"]), 1);
    // Usage and lock errors: exit 2.
    strictEqual(await main(["--all", "--lock", lock, "--root", root, "--only", "nope"]), 2);
    strictEqual(await main(["--bogus"]), 2);
    strictEqual(await main(["--all", "--lock", join(dir, "missing.lock"), "--root", root]), 2);
  } finally {
    await server.close();
    await Deno.remove(dir, { recursive: true });
  }
});

const REPO = new URL("../../", import.meta.url).pathname;
const TINY_SET = join(REPO, "tests/fixtures/tiny/models/sd15-optimum");

/** Runs `deno task models …` as a user would, in `cwd`; returns status and both streams. */
function models(cwd: string, ...args: string[]) {
  return modelsTask(cwd, args, { SD_MCP_LOG_LEVEL: "info" });
}

async function copyTree(from: string, to: string): Promise<void> {
  await Deno.mkdir(to, { recursive: true });
  for await (const e of Deno.readDir(from)) {
    if (e.isDirectory) await copyTree(join(from, e.name), join(to, e.name));
    else if (e.isFile) await Deno.copyFile(join(from, e.name), join(to, e.name));
  }
}

Deno.test("cli: models add --write-config, then models check: ok, missing, wrong size, wrong hash", async () => {
  const dir = await Deno.makeTempDir({ prefix: "models_cli_check_" });
  try {
    await copyTree(TINY_SET, join(dir, "models/own"));
    await Deno.copyFile(join(REPO, "models.lock"), join(dir, "models.lock"));
    const configText = `[models]\nroot = "models"\n[generation]\npreset = "quality"\n`;
    await Deno.writeTextFile(join(dir, "config.toml"), configText);
    const shipped = await Deno.readTextFile(join(dir, "models.lock"));
    const added = await models(dir, "add", "models/own", "--write-config");
    strictEqual(added.code, 0, added.stderr);
    match(added.stderr, /hashing own\/unet\/model\.onnx_data/, "a progress line per hashed file");
    // Each file's progress line once, and no log line repeating it.
    strictEqual(added.stderr.split("hashing own/unet/model.onnx_data").length, 2, added.stderr);
    // The user's choice goes to the overlays; the shipped files are untouched.
    strictEqual(await Deno.readTextFile(join(dir, "config.toml")), configText);
    strictEqual(await Deno.readTextFile(join(dir, "models.lock")), shipped);
    match(await Deno.readTextFile(join(dir, "config.local.toml")), /^base = "own"$/m);
    match(
      await Deno.readTextFile(join(dir, "models.local.lock")),
      /path = "own\/unet\/model\.onnx"/,
    );

    const good = await models(dir, "check");
    strictEqual(good.code, 0, good.stdout + good.stderr);
    const rows = good.stdout.trim().split("\n");
    strictEqual(rows.length, 9, good.stdout); // 8 files + the summary
    for (const row of rows.slice(0, 8)) match(row, /^ok +own\//);
    match(rows[8], /8 files needed by the configuration .*: all ok$/, "warm cache: nothing hashed");

    await Deno.remove(join(dir, "models/own/vae_decoder/model.onnx"));
    const vocab = join(dir, "models/own/tokenizer/vocab.json");
    await Deno.writeTextFile(vocab, " ", { append: true });
    const unet = join(dir, "models/own/unet/model.onnx_data");
    const bytes = await Deno.readFile(unet);
    bytes[10] ^= 0xff;
    await Deno.writeFile(unet, bytes);
    const bad = await models(dir, "check");
    strictEqual(bad.code, 1, bad.stdout + bad.stderr);
    match(
      bad.stdout,
      /^missing +own\/vae_decoder\/model\.onnx .*expected at .*own\/vae_decoder\/model\.onnx/m,
    );
    match(
      bad.stdout,
      /^wrong size +own\/tokenizer\/vocab\.json +\(\[models\] base = "own": size is/m,
    );
    match(
      bad.stdout,
      /^wrong hash +own\/unet\/model\.onnx_data .*sha256 is [0-9a-f]{64}, expected/m,
    );
    match(bad.stdout, /^ok +own\/text_encoder\/model\.onnx$/m);
    match(bad.stdout, /3 not ok; 1 hashed$/m);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cli: an unreachable host ends `deno task models` with one line, no retries", async () => {
  const dir = await Deno.makeTempDir({ prefix: "models_cli_offline_" });
  try {
    const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const port = (l.addr as Deno.NetAddr).port;
    l.close();
    const lock = (url: string) =>
      [1, 2, 3].map((i) =>
        `[[file]]\ncomponent = "scheduler"\npath = "sd15/scheduler/f${i}.json"\n` +
        `url = "${url}/f${i}.json"\nsize = 10\nsha256 = "${"0".repeat(64)}"\n`
      ).join("\n");
    for (
      const [url, host, reason] of [
        [`http://127.0.0.1:${port}`, `127.0.0.1:${port}`, "connection refused"],
        ["https://models.example.invalid", "models.example.invalid", "DNS lookup failed"],
      ]
    ) {
      await Deno.writeTextFile(join(dir, "models.lock"), lock(url));
      const r = await models(dir, "--all");
      strictEqual(r.code, 1, r.stderr);
      const errors = r.stderr.split("\n").filter((l) => l.includes("ERROR"));
      strictEqual(errors.length, 1, r.stderr);
      ok(errors[0].includes(`cannot reach ${host}: ${reason}`), errors[0]);
      for (const part of ["HTTPS_PROXY", "NO_PROXY", "deno task models add"]) {
        ok(errors[0].includes(part), `${part}: ${errors[0]}`);
      }
      ok(!r.stderr.includes("retrying"), r.stderr);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cli: a dead HTTPS_PROXY is named in the one line, with how to bypass it", async () => {
  const dir = await Deno.makeTempDir({ prefix: "models_cli_proxy_" });
  try {
    const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const port = (l.addr as Deno.NetAddr).port;
    l.close();
    const url =
      "https://huggingface.co/o/r/resolve/0123456789abcdef0123456789abcdef01234567/f.json";
    await Deno.writeTextFile(
      join(dir, "models.lock"),
      `[[file]]\ncomponent = "scheduler"\npath = "sd15/scheduler/f.json"\nurl = "${url}"\n` +
        `size = 10\nsha256 = "${"0".repeat(64)}"\n`,
    );
    const out = await modelsTask(dir, ["--all"], {
      HTTPS_PROXY: `http://user:hunter2@127.0.0.1:${port}`,
      NO_PROXY: "",
    });
    const stderr = out.stderr;
    strictEqual(out.code, 1, stderr);
    const errors = stderr.split("\n").filter((line) => line.includes("ERROR"));
    strictEqual(errors.length, 1, stderr);
    match(
      errors[0],
      new RegExp(
        `cannot reach huggingface\\.co through the proxy http://user:\\*\\*\\*@127\\.0\\.0\\.1:${port} ` +
          `\\(HTTPS_PROXY\\): connection refused`,
      ),
    );
    match(errors[0], /unset HTTPS_PROXY \(or add huggingface\.co to NO_PROXY\)/);
    ok(!stderr.includes("hunter2"), "the proxy's password is not printed");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cli: SIGTERM during a download ends `deno task models` with 130 and keeps the partial file to resume", async () => {
  const content = new Uint8Array(200_000).map((_, i) => (i * 31) % 251);
  const sha = createHash("sha256").update(content).digest("hex");
  const dir = await Deno.makeTempDir({ prefix: "models_cli_sigterm_" });
  // The first response stalls after 70,000 bytes and never ends; the next ones are normal.
  const server = await startFixtureServer(
    content,
    (n) => n === 1 ? { kind: "stall", after: 70_000 } : { kind: "normal" },
  );
  try {
    await Deno.writeTextFile(
      join(dir, "models.lock"),
      `[[file]]\ncomponent = "unet"\npath = "sd15/unet/weights.pb"\nurl = "${server.url}"\n` +
        `size = ${content.length}\nsha256 = "${sha}"\n`,
    );
    const child = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--config",
        join(REPO, "deno.json"),
        "-P=models",
        "--quiet",
        join(REPO, "mod/models/cli.ts"),
        "--all",
      ],
      cwd: dir,
      stdin: "null",
      stdout: "null",
      stderr: "piped",
      env: { NO_COLOR: "1" },
    }).spawn();
    const stderrText = new Response(child.stderr).text();
    const partial = join(dir, "models/sd15/unet/weights.pb.partial");
    // Until the stalled bytes are on disk: the download is under way and cannot end by itself.
    for (;;) {
      const size = await Deno.stat(partial).then((s) => s.size, () => 0);
      if (size >= 70_000) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    child.kill("SIGTERM");
    const { code } = await child.status;
    const stderr = await stderrText;
    strictEqual(code, 130, stderr);
    match(stderr, /interrupted; run `deno task models` again to resume/);
    strictEqual((await Deno.stat(partial)).size, 70_000, "the partial file is kept");
    await Deno.stat(join(dir, "models/sd15/unet/weights.pb")).then(
      () => ok(false, "no final file"),
      (e) => ok(e instanceof Deno.errors.NotFound),
    );
    // The next run resumes from it.
    strictEqual(
      await main(["--all", "--lock", join(dir, "models.lock"), "--root", join(dir, "models")]),
      0,
    );
    strictEqual(server.requests.at(-1)?.range, "bytes=70000-");
    deepStrictEqual(await Deno.readFile(join(dir, "models/sd15/unet/weights.pb")), content);
  } finally {
    await server.close();
    await Deno.remove(dir, { recursive: true });
  }
});
