/**
 * SIGTERM on the real HTTP server: it stops accepting, lets the running
 * generation finish, then exits 0.
 */

import assert from "node:assert/strict";
import { createTestKey as createKey, teeChildLog } from "./helpers/log_secrets.ts";
import { connectHttp } from "./helpers/http_client.ts";
import { followStderr, HTTP_LISTENING } from "./helpers/child_stderr.ts";
import { ROOT } from "./helpers/paths.ts";
import { openTestDatabase } from "./helpers/postgres.ts";
import { pngs, texts } from "./helpers/results.ts";
import { writeTinyConfig } from "./helpers/tiny_config.ts";

Deno.test("SIGTERM lets the running generation finish, then exits 0", async () => {
  const tdb = await openTestDatabase("shutdown");
  // The grace is far longer than the generation takes on any machine that runs the suite: the
  // test is that the generation is let finish, not how fast it is (a shorter grace would end it
  // on a busy machine, by design).
  const temp = await writeTinyConfig(`[generation]\nsteps = 500\n`, {
    shutdown_grace_seconds: 600,
  });
  const key = await createKey(tdb.db, { projectId: null, userId: 1, permission: "write" });
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-P=serve", "--quiet", "main.ts", "--config", temp.path, "--transport", "http"],
    cwd: ROOT,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
    env: { NO_COLOR: "1", DATABASE_URL: tdb.url },
  }).spawn();
  const stderr = followStderr(child.stderr);
  const port = Number((await stderr.waitFor(HTTP_LISTENING, "listening"))[1]);
  const drained = stderr.drain();
  try {
    const client = await connectHttp(port, { "MCP-API-Key": key.key });
    let started!: () => void;
    const firstStep = new Promise<void>((r) => started = r);
    const call = client.callTool(
      { name: "generate_image", arguments: { positive_prompt: "a quiet harbour" } },
      undefined,
      { timeout: 120_000, onprogress: () => started() },
    );
    await firstStep;
    child.kill("SIGTERM");
    const result = await call;
    assert.equal(result.isError, undefined, texts(result));
    assert.equal(pngs(result).length, 1);
    const status = await child.status;
    await drained;
    teeChildLog("http server (SIGTERM)", stderr.text());
    assert.equal(status.code, 0, stderr.text());
    // Every shutdown wait is bounded by one finite deadline (no setTimeout(Infinity)).
    assert.doesNotMatch(stderr.text(), /TimeoutOverflowWarning/);
    // The signal was handled while the generation ran, and it still finished.
    const stop = stderr.text().indexOf("shutting down");
    const done = stderr.text().indexOf("[generation] done");
    assert.ok(
      stop >= 0 && done > stop,
      `shutdown did not wait for the generation:\n${stderr.text()}`,
    );
    await assert.rejects(fetch(`http://127.0.0.1:${port}/healthz`));
    await client.close().catch(() => {});
  } finally {
    try {
      child.kill("SIGKILL");
    } catch { /* already gone */ }
    await tdb.close();
    await temp.remove();
  }
});
