import assert from "node:assert/strict";
import { databaseUnavailableReason, gatherHealth, healthResponse, withDatabase } from "./health.ts";

/** A read that a stalled database never answers. */
const never = <T>() => new Promise<T>(() => {});

Deno.test("/healthz: a probe that timed out names the bound; one that failed says the database refused", () => {
  const stalled = withDatabase({ database: "unavailable", timedOut: true }, { role: "all" }, 1500);
  assert.equal(
    stalled.unavailable,
    "the database is unavailable (no answer to a SELECT 1 within 1500 ms, auth.db_timeout_ms: " +
      "it is stalled or unreachable): API keys cannot be checked nor jobs stored until it answers again",
  );
  const down = withDatabase({ database: "unavailable", timedOut: false }, {}, 1500);
  assert.equal(down.unavailable, databaseUnavailableReason(false, 1500));
  assert.match(down.unavailable!, /a SELECT 1 failed: it is down or refused the connection/);
  assert.deepEqual(withDatabase({ database: "ok" }, { role: "all" }, 1500), {
    role: "all",
    database: "ok",
  });
});

Deno.test("/healthz: reads that never answer still give a 503 with the reason, at the bound", async () => {
  const timeoutMs = 200;
  const started = performance.now();
  const fields = await gatherHealth({ timeoutMs, probe: never, fields: never });
  const waited = performance.now() - started;
  // The bound is the one the product enforces (auth.db_timeout_ms); the answer does not wait for ever.
  assert.ok(waited >= timeoutMs - 5 && waited < timeoutMs + 2_000, `waited ${waited} ms`);
  const response = healthResponse(fields);
  assert.equal(response.status, 503);
  assert.equal(response.headers.get("retry-after"), "5");
  const body = await response.json();
  assert.equal(body.status, "unavailable");
  assert.equal(body.database, "unavailable");
  assert.match(body.reason, /no answer to a SELECT 1 within 200 ms, auth\.db_timeout_ms/);
});

Deno.test("/healthz: the probe and the other fields are read at once; a probe that answers makes it 200", async () => {
  let fieldsAsked = false;
  const fields = await gatherHealth({
    timeoutMs: 5_000,
    probe: async () => {
      // The other fields were asked for before the probe answered.
      await new Promise((r) => setTimeout(r, 20));
      assert.ok(fieldsAsked);
      return { database: "ok" };
    },
    fields: () => {
      fieldsAsked = true;
      return Promise.resolve({ queue: { waiting: 0 } });
    },
  });
  assert.deepEqual(fields, { queue: { waiting: 0 }, database: "ok" });
  assert.equal(healthResponse(fields).status, 200);
});

Deno.test("/healthz: queue numbers that did not come in time are left out; the probe decides", async () => {
  const fields = await gatherHealth({
    timeoutMs: 100,
    probe: () => Promise.resolve({ database: "ok" }),
    fields: never,
  });
  assert.deepEqual(fields, { database: "ok" });
});
