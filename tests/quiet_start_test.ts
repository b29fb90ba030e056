/**
 * A warm start is quiet: `deno task serve` looks nothing up on the npm
 * registry and prints neither "Download https://registry.npmjs.org/…" lines
 * nor Deno's warning about permission sets. Deno 2.9 fetches the package
 * document of every npm import while it builds the module graph — even with
 * deno.lock pinning each version and node_modules in place — whenever that
 * document is not in its cache, which is the case on a machine whose cache
 * was filled offline or is new; offline, the fetch fails quietly and is tried
 * again at every start whose graph changed (after every update). The tasks
 * run with `--cached-only --frozen -q` (deno.json).
 *
 * The test reproduces that state: a copy of the program with its
 * node_modules and an empty DENO_DIR. And each line once: a Ctrl-C, which
 * reaches the server both from the terminal and through deno task, logs one
 * shutdown line.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import manifest from "../deno.json" with { type: "json" };
import { followStderr, HTTP_LISTENING } from "./helpers/child_stderr.ts";
import { connectHttp } from "./helpers/http_client.ts";
import { createTestKey, teeChildLog } from "./helpers/log_secrets.ts";
import { openTestDatabase } from "./helpers/postgres.ts";
import { texts } from "./helpers/results.ts";
import { ROOT, TINY_CONFIG } from "./helpers/paths.ts";
import { writeTinyConfig } from "./helpers/tiny_config.ts";

async function run(cwd: string, env: Record<string, string>, args: string[]) {
  const out = await new Deno.Command(Deno.execPath(), {
    args,
    cwd,
    env: { NO_COLOR: "1", ...env },
    stdin: "null",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

async function copy(from: string, to: string, flags: string): Promise<boolean> {
  const out = await new Deno.Command("cp", { args: [flags, from, to], stderr: "null" }).output();
  return out.success;
}

/** A source change, as an update brings: the module graph is built again at the next start. */
async function touch(app: string): Promise<void> {
  await Deno.writeTextFile(join(app, "mod/log/mod.ts"), "\n// changed\n", { append: true });
}

const REGISTRY = /Download https:\/\/registry\.npmjs\.org\//;

Deno.test("a warm deno task serve makes no registry lookups and prints no Download or permission warning", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sd15-quiet-" });
  try {
    const app = join(dir, "app");
    await Deno.mkdir(app);
    for (const entry of ["main.ts", "mod", "tools", "deno.json", "deno.lock"]) {
      assert.ok(await copy(join(ROOT, entry), app, "-r"), `copy ${entry}`);
    }
    // A real copy (under a second on 2 cores): deno may rewrite files of its node_modules, and
    // hard links would carry that into the checkout's own.
    assert.ok(await copy(join(ROOT, "node_modules"), app, "-a"), "node_modules");
    // A new, empty DENO_DIR each time: the state in which deno looks the packages up.
    let dirs = 0;
    const fresh = () => ({ DENO_DIR: join(dir, `deno-dir-${++dirs}`) });
    const version = `generate-image-sd15-mcp ${manifest.version} ` +
      `(deno ${Deno.version.deno}, v8 ${Deno.version.v8})\n`;
    const taskLine = `Task serve ${manifest.tasks.serve} '--version'`;

    const env = fresh();
    const first = await run(app, env, ["task", "serve", "--version"]);
    assert.equal(first.code, 0, first.stderr);
    assert.equal(first.stdout, version);
    assert.deepEqual(first.stderr.trimEnd().split("\n"), [taskLine], "only deno task's own line");
    // After a change to the sources, as after `git pull`: the same.
    await touch(app);
    const warm = await run(app, env, ["task", "serve", "--version"]);
    assert.equal(warm.code, 0, warm.stderr);
    assert.deepEqual(warm.stderr.trimEnd().split("\n"), [taskLine]);

    // Not merely hidden by -q: the task's command without it looks nothing up either.
    // The words of the command, after the environment assignments it starts with.
    const [deno, ...taskArgs] = manifest.tasks.serve.split(" ").filter((w) => !/^[A-Z_]+=/.test(w));
    assert.equal(deno, "deno");
    const loud = await run(app, fresh(), [...taskArgs.filter((a) => a !== "-q"), "--version"]);
    assert.equal(loud.code, 0, loud.stderr);
    assert.doesNotMatch(loud.stderr, REGISTRY);

    // A whole start (config, model check, engine in its Worker, codec) is as quiet.
    const check = await run(app, env, ["task", "serve", "--check", "--config", TINY_CONFIG]);
    assert.equal(check.code, 0, check.stdout + check.stderr);
    assert.doesNotMatch(check.stderr, /Download|Warning|experimental/);

    // The control: without the flags the same start does look the packages up, so this
    // environment reproduces what the flags prevent.
    const bare = await run(app, fresh(), ["run", "-P=serve", "main.ts", "--version"]);
    assert.match(
      bare.stderr,
      REGISTRY,
      "deno run without the task's flags looked nothing up: this Deno no longer fetches package " +
        "documents at start-up, so this test proves nothing any more (see its header)",
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("Ctrl-C on deno task serve: one shutdown line, clean exit", async () => {
  const tdb = await openTestDatabase("ctrl_c");
  // Long enough that the server is still stopping when the second signal comes.
  // A grace far longer than the generation takes on any machine: it is let finish.
  const temp = await writeTinyConfig(`[generation]\nsteps = 500\n`, {
    transport: "http",
    shutdown_grace_seconds: 600,
  });
  const key = await createTestKey(tdb.db, { projectId: null, userId: 1, permission: "write" });
  // A terminal's Ctrl-C signals the whole process group: deno task and the server in it, and
  // deno task passes it on to the server as well.
  const child = new Deno.Command("setsid", {
    args: [Deno.execPath(), "task", "serve", "--config", temp.path],
    cwd: ROOT,
    env: { NO_COLOR: "1", DATABASE_URL: tdb.url },
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const stderr = followStderr(child.stderr);
  try {
    const port = Number((await stderr.waitFor(HTTP_LISTENING, "listening"))[1]);
    await stderr.waitFor(/models loaded/, "models loaded");
    const drained = stderr.drain();
    const client = await connectHttp(port, { "MCP-API-Key": key.key });
    let started!: () => void;
    const firstStep = new Promise<void>((resolve) => started = resolve);
    const call = client.callTool(
      { name: "generate_image", arguments: { positive_prompt: "a quiet harbour" } },
      undefined,
      { timeout: 120_000, onprogress: () => started() },
    );
    await firstStep;
    Deno.kill(-child.pid, "SIGINT");
    // Once more while it stops (the generation keeps it alive), as deno task's copy or a
    // second press comes.
    await new Promise((resolve) => setTimeout(resolve, 300));
    Deno.kill(-child.pid, "SIGINT");
    const result = await call;
    assert.equal(result.isError, undefined, texts(result));
    const status = await child.status;
    await drained;
    teeChildLog("deno task serve (Ctrl-C)", stderr.text());
    await client.close().catch(() => {});
    assert.equal(status.code, 0, stderr.text());
    assert.equal(stderr.text().split("shutting down").length, 2, stderr.text());
  } finally {
    try {
      Deno.kill(-child.pid, "SIGKILL");
    } catch { /* already gone */ }
    await tdb.close();
    await temp.remove();
  }
});
