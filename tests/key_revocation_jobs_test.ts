/**
 * A revoked or deleted API key's generations stop: its queued jobs are
 * cancelled in the revocation's own transaction (whoever writes it: the
 * `keys` CLI is another process), its running job stops within one sampler
 * step of the worker hearing of it, and the jobs of the project's other keys
 * go on; its finished results stay readable by those keys. Real PostgreSQL
 * (`DATABASE_URL`, else embedded), the key functions the CLI runs, and an
 * engine whose steps advance only when the test says.
 */

import assert from "node:assert/strict";
import { createKey, deleteKey, revokeKey } from "../mod/auth/mod.ts";
import type { ImageRequest, RunHooks, RunOutcome } from "../mod/generation/request.ts";
import { checkImageRequest } from "../mod/generation/request_check.ts";
import { CANCEL_POLL_MS, JobService, PostgresJobStore } from "../mod/jobs/mod.ts";
import type { Scope, ToolContext } from "../mod/mcp/tool.ts";
import { openTestDatabase } from "./helpers/postgres.ts";

const request = (): ImageRequest => ({
  tool: "generate_image",
  mode: "text_to_image",
  positive: "a cat",
  negative: "",
  size: "square_512",
  name: null,
  seeds: [1],
  receivedAt: Date.now(),
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(check: () => Promise<boolean>, what: string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!await check()) {
    if (Date.now() > end) throw new Error(`timed out waiting until ${what}`);
    await sleep(20);
  }
}

Deno.test("a revoked key's queued jobs are cancelled at once and its running job stops within one step; a deleted key's too; the project's other keys go on and still read its results", async () => {
  const tdb = await openTestDatabase("key_revocation");
  const limits = { queueLimit: 20, resultTtlMs: 3_600_000, maxResultBytes: 1 << 24 };
  const store = new PostgresJobStore(tdb.db, limits, { leaseMs: 30_000 });
  /** Steps the engine took, and a release for the next one (every step waits for it). */
  let steps = 0;
  let release: (() => void) | null = null;
  let instant = true;
  const execute = async (_job: unknown, hooks: RunHooks): Promise<RunOutcome> => {
    for (let step = 1; step <= 1000; step++) {
      // The step boundary: where the pipeline heeds its signal.
      if (hooks.signal.aborted) return { state: "cancelled", error: null };
      if (!instant) {
        await new Promise<void>((r) => {
          release = r;
          hooks.signal.addEventListener("abort", () => r(), { once: true });
        });
        if (hooks.signal.aborted) return { state: "cancelled", error: null };
      }
      steps++;
      hooks.onProgress({ image: 1, images: 1, step, steps: 1000 });
      if (instant && step === 2) break;
    }
    await hooks.onItems([{ type: "image", data: "cG5n", mimeType: "image/png" }], 1);
    return { state: "succeeded", error: null };
  };
  const jobs = new JobService({
    store,
    execute,
    checkRequest: (r) => checkImageRequest(r, { maxCount: 10 }),
    maxWaitMs: 0,
    resultTtlSeconds: 3600,
    queueLimit: 20,
    stepsPerImage: 1000,
    worker: "revocation-test",
    pollMs: 50,
  });
  await jobs.start();
  const revoked = await createKey(tdb.db, { projectId: 1, userId: 1, permission: "write" });
  const colleague = await createKey(tdb.db, { projectId: 1, userId: 2, permission: "write" });
  const deleted = await createKey(tdb.db, { projectId: 2, userId: 3, permission: "write" });
  const scope = (prefix: string, projectId: number): Scope => ({
    keyPrefix: prefix,
    projectId,
    userId: 1,
    permission: "write",
  });
  const context = (s: Scope): ToolContext => ({
    signal: new AbortController().signal,
    scope: s,
    progress: () => Promise.resolve(),
  });
  const mine = { owner: `key:${revoked.prefix}`, project: 1 };
  const theirs = { owner: `key:${colleague.prefix}`, project: 1 };
  const submit = async (s: Scope) => {
    const r = await jobs.submit(request(), context(s));
    return (r.structuredContent as { job_id: string }).job_id;
  };
  try {
    // A finished result of the key, made before it is revoked.
    const finished = await submit(scope(revoked.prefix, 1));
    await until(
      async () => (await store.summary(finished, mine))?.state === "succeeded",
      "the first job succeeded",
    );
    // Now a running job of the key (steps wait for the test), two queued ones, and the
    // colleague's and the other project's queued behind them.
    instant = false;
    const running = await submit(scope(revoked.prefix, 1));
    await until(
      async () => (await store.summary(running, mine))?.state === "running",
      "the second runs",
    );
    const queued = [await submit(scope(revoked.prefix, 1)), await submit(scope(revoked.prefix, 1))];
    const colleagues = await submit(scope(colleague.prefix, 1));
    const other = await submit(scope(deleted.prefix, 2));
    release!();
    await until(() => Promise.resolve(steps === 3), "it took its first step");

    // Revoked as `deno task keys revoke` does it.
    assert.equal(await revokeKey(tdb.db, revoked.prefix), "changed");
    // At once: the queued ones are cancelled, with the reason; the colleague's job is not.
    for (const id of queued) {
      const job = await store.summary(id, mine);
      assert.equal(job?.state, "cancelled");
      assert.match(job?.error ?? "", /API key that made this generation was revoked/);
    }
    assert.equal((await store.summary(colleagues, theirs))?.state, "queued");
    // The running one stops at its next step boundary once the worker has read the request
    // (within CANCEL_POLL_MS): no step is released meanwhile, so it stops within one step.
    await sleep(CANCEL_POLL_MS * 3);
    await until(
      async () => (await store.summary(running, mine))?.state === "cancelled",
      "it stopped",
      3_000,
    );
    assert.ok(steps <= 4, `the running job took ${steps - 2} steps, 1 before the revocation`);
    const stopped = await store.summary(running, mine);
    assert.match(stopped?.error ?? "", /was revoked/);

    // The project's other keys still read the revoked key's finished result.
    const kept = await store.get(finished, theirs);
    assert.equal(kept?.state, "succeeded");
    assert.equal(kept?.items.length, 1);

    // The colleague's job runs next; a deleted key's queued job is cancelled as it is deleted.
    await until(
      async () => (await store.summary(colleagues, theirs))?.state === "running",
      "the colleague's runs",
    );
    assert.equal(await deleteKey(tdb.db, deleted.prefix), "changed");
    const gone = await store.summary(other, { owner: `key:${deleted.prefix}`, project: 2 });
    assert.equal(gone?.state, "cancelled");
    assert.match(gone?.error ?? "", /was deleted/);
    assert.equal((await store.summary(colleagues, theirs))?.state, "running");
  } finally {
    instant = true;
    jobs.abortRunning();
    const closing = jobs.close("test over", false);
    jobs.abortRunning();
    await closing;
    await jobs.dispose();
    await tdb.close();
  }
});
