/**
 * The API-key matrix (X-MCP-Token, key headers and formats, key states,
 * permissions and project binding, cache, bounded waits) at the
 * `authenticate()` level, against the test
 * database (a real PostgreSQL server with DATABASE_URL, else embedded PostgreSQL).
 */
import { deepStrictEqual, match, ok, strictEqual, throws } from "node:assert";
import type { Queryable, Row, SqlParam } from "../db/mod.ts";
import { setLogLevel } from "../log/mod.ts";
import { openTestDatabase } from "../../tests/helpers/postgres.ts";
import type { AuthOutcome } from "./auth_outcome.ts";
import { type AuthenticatorOptions, createAuthenticator } from "./authenticator.ts";
import {
  createTestKey as createKey,
  registerSecret,
  teeInProcess,
} from "../../tests/helpers/log_secrets.ts";
import { nodeScrypt, type ScryptFunction } from "./key_hash.ts";
import { deleteKey, revokeKey, touchLastUsed } from "./key_store.ts";
import { checkToolScope } from "../mcp/tool_scope.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function request(headers: Record<string, string>): Request {
  return new Request("http://127.0.0.1/mcp", { method: "POST", headers, body: "{}" });
}

function failure(
  outcome: AuthOutcome,
): { status: number; message: string; invalidToken?: boolean } {
  ok(!outcome.ok, `expected a refusal, got ${JSON.stringify(outcome)}`);
  return outcome;
}

/** Retries `fn` until it returns true or `ms` pass. */
async function eventually(what: string, fn: () => Promise<boolean>, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await fn()) return;
    await sleep(100);
  }
  throw new Error(`${what} did not happen within ${ms} ms`);
}

Deno.test({
  name: "authenticate(): the API-key matrix",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    // Everything written to stderr (all log lines) is captured and searched for secrets at the end.
    const captured: string[] = [];
    const decoder = new TextDecoder();
    const stderr = Deno.stderr as { writeSync(p: Uint8Array): number };
    const originalWrite = stderr.writeSync;
    stderr.writeSync = (p: Uint8Array) => {
      const text = decoder.decode(p);
      captured.push(text);
      // Kept off the terminal (debug level), but searched with the whole run's logs.
      teeInProcess(text);
      return p.length;
    };
    setLogLevel("debug");
    const outcomes: AuthOutcome[] = [];

    const test = await openTestDatabase("authenticator");
    const { db, proxy } = test;
    const cfSecret = `cf-${crypto.randomUUID()}`;
    registerSecret(cfSecret);
    let scryptRuns = 0;
    const countingScrypt: ScryptFunction = (password, salt) => {
      scryptRuns++;
      return nodeScrypt(password, salt);
    };
    const make = (overrides: Partial<AuthenticatorOptions> = {}) =>
      createAuthenticator({
        db,
        environment: "production",
        cloudfrontSecret: cfSecret,
        cacheTtlMs: 60_000,
        lastUsedIntervalMs: 60_000,
        dbTimeoutMs: 3_000,
        scrypt: countingScrypt,
        ...overrides,
      });
    const auth = make();
    const authenticate = async (headers: Record<string, string>, a = auth) => {
      const outcome = await a.authenticate(request(headers));
      outcomes.push(outcome);
      return outcome;
    };

    const keys: string[] = [];
    const newKey = async (options: Partial<Parameters<typeof createKey>[1]> = {}) => {
      const created = await createKey(db, {
        projectId: 42,
        userId: 7,
        permission: "write",
        ...options,
      });
      keys.push(created.key);
      return created;
    };

    try {
      const writeKey = await newKey({ name: "writer" });
      const readKey = await newKey({ permission: "read" });

      await t.step("production: X-MCP-Token missing, wrong, right", async () => {
        let f = failure(await authenticate({ "MCP-API-Key": writeKey.key }));
        strictEqual(f.status, 401);
        match(f.message, /missing X-MCP-Token/);
        f = failure(
          await authenticate({ "X-MCP-Token": cfSecret + "x", "MCP-API-Key": writeKey.key }),
        );
        strictEqual(f.status, 401);
        match(f.message, /invalid X-MCP-Token/);
        f = failure(await authenticate({ "X-MCP-Token": "", "MCP-API-Key": writeKey.key }));
        strictEqual(f.status, 401);
        const good = await authenticate({ "X-MCP-Token": cfSecret, "MCP-API-Key": writeKey.key });
        deepStrictEqual(good, {
          ok: true,
          scope: { keyPrefix: writeKey.prefix, projectId: 42, userId: 7, permission: "write" },
        });
      });

      await t.step(
        "local: no X-MCP-Token needed, and a wrong one is ignored; the key still is",
        async () => {
          const local = make({ environment: "local", cloudfrontSecret: undefined });
          ok((await authenticate({ "MCP-API-Key": writeKey.key }, local)).ok);
          ok(
            (await authenticate({ "X-MCP-Token": "nonsense", "MCP-API-Key": writeKey.key }, local))
              .ok,
          );
          const f = failure(await authenticate({}, local));
          strictEqual(f.status, 401);
          match(f.message, /missing API key/);
          strictEqual(f.invalidToken, false);
          await local.close();
        },
      );

      await t.step(
        "a production authenticator cannot be made without CLOUDFRONT_SECRET_HEADER",
        () => {
          throws(
            () => make({ cloudfrontSecret: undefined }),
            /environment is "production" but CLOUDFRONT_SECRET_HEADER is not set/,
          );
          throws(() => make({ cloudfrontSecret: "" }), /CLOUDFRONT_SECRET_HEADER is not set/);
        },
      );

      const token = { "X-MCP-Token": cfSecret };

      await t.step("both key headers work; other Authorization schemes do not", async () => {
        ok((await authenticate({ ...token, "MCP-API-Key": readKey.key })).ok);
        const viaBearer = await authenticate({ ...token, Authorization: `Bearer ${readKey.key}` });
        deepStrictEqual(viaBearer, {
          ok: true,
          scope: { keyPrefix: readKey.prefix, projectId: 42, userId: 7, permission: "read" },
        });
        const f = failure(
          await authenticate({ ...token, Authorization: `Basic ${btoa("u:" + readKey.key)}` }),
        );
        strictEqual(f.status, 401);
        match(f.message, /unsupported Authorization scheme/);
      });

      await t.step("malformed keys are 401 without touching the database", async () => {
        await proxy.down(); // a database lookup would now give 503
        try {
          for (
            const bad of [
              "guinness_",
              "guinness_abc",
              "sk_live_abc_def",
              `${writeKey.key}!`,
              "guinness_a_b c",
            ]
          ) {
            const f = failure(await authenticate({ ...token, "MCP-API-Key": bad }));
            strictEqual(f.status, 401, bad);
            match(f.message, /malformed API key/);
            strictEqual(f.invalidToken, true);
          }
        } finally {
          await proxy.up();
        }
      });

      await t.step("unknown prefix and wrong secret are both 'invalid API key'", async () => {
        const unknown = failure(
          await authenticate({
            ...token,
            "MCP-API-Key": "guinness_NoSuchPrefix1_abcdefghijklmnopqrstuvwxyzABCDEFGH",
          }),
        );
        strictEqual(unknown.status, 401, JSON.stringify(unknown));
        strictEqual(unknown.message, "invalid API key");
        const secretPart = writeKey.key.slice(writeKey.key.lastIndexOf("_") + 1);
        const wrong = failure(
          await authenticate({
            ...token,
            // Change the last character (to one it is not) so the secret is surely wrong.
            "MCP-API-Key": `guinness_${writeKey.prefix}_${secretPart.slice(0, -1)}${
              secretPart.endsWith("X") ? "Y" : "X"
            }`,
          }),
        );
        strictEqual(wrong.status, 401);
        strictEqual(wrong.message, "invalid API key");
        strictEqual(wrong.invalidToken, true);
      });

      await t.step("revoked, expired and deleted keys are 401", async () => {
        const revoked = await newKey();
        strictEqual(await revokeKey(db, revoked.prefix), "changed");
        let f = failure(await authenticate({ ...token, "MCP-API-Key": revoked.key }));
        strictEqual(f.status, 401);
        strictEqual(f.message, "API key revoked");
        // Without the right secret a revoked key says nothing about its state.
        f = failure(
          await authenticate({ ...token, "MCP-API-Key": revoked.key.slice(0, -1) + "0" }),
        );
        strictEqual(f.message, revoked.key.endsWith("0") ? "API key revoked" : "invalid API key");

        const expired = await newKey();
        await db.query(
          "UPDATE mcp_api_keys SET expires_at = now() - interval '1 second' WHERE key_prefix = $1",
          [
            expired.prefix,
          ],
        );
        f = failure(await authenticate({ ...token, "MCP-API-Key": expired.key }));
        strictEqual(f.status, 401);
        strictEqual(f.message, "API key expired");

        const future = await newKey({ expiresAt: new Date(Date.now() + 3_600_000) });
        ok(
          (await authenticate({ ...token, "MCP-API-Key": future.key })).ok,
          "a key expiring later works",
        );

        const deleted = await newKey();
        strictEqual(await deleteKey(db, deleted.prefix), "changed");
        f = failure(await authenticate({ ...token, "MCP-API-Key": deleted.key }));
        strictEqual(f.status, 401);
        strictEqual(f.message, "invalid API key");
      });

      await t.step("read vs write, and the project binding, on the returned scope", async () => {
        const read = await authenticate({ ...token, "MCP-API-Key": readKey.key });
        const write = await authenticate({ ...token, "MCP-API-Key": writeKey.key });
        ok(read.ok && write.ok);
        strictEqual(checkToolScope(read.scope, true), null);
        match(checkToolScope(read.scope, false) ?? "", /read permission/);
        strictEqual(checkToolScope(write.scope, false), null);
        strictEqual(write.scope.projectId, 42);
        const unbound = await newKey({ projectId: null, userId: null });
        const any = await authenticate({ ...token, "MCP-API-Key": unbound.key });
        ok(any.ok);
        strictEqual(any.scope.projectId, null);
      });

      await t.step("the cache does not outlive a revocation, deletion or expiry", async () => {
        for (const change of ["revoke", "delete", "expire"] as const) {
          const key = await newKey();
          ok((await authenticate({ ...token, "MCP-API-Key": key.key })).ok);
          const runs = scryptRuns;
          ok((await authenticate({ ...token, "MCP-API-Key": key.key })).ok);
          strictEqual(scryptRuns, runs, "the second request is served from the cache");
          if (change === "revoke") await revokeKey(db, key.prefix);
          if (change === "delete") await deleteKey(db, key.prefix);
          if (change === "expire") {
            await db.query("UPDATE mcp_api_keys SET expires_at = now() WHERE key_prefix = $1", [
              key.prefix,
            ]);
          }
          const f = failure(await authenticate({ ...token, "MCP-API-Key": key.key }));
          strictEqual(f.status, 401, change);
          strictEqual(
            f.message,
            {
              revoke: "API key revoked",
              delete: "invalid API key",
              expire: "API key expired",
            }[change],
          );
        }
      });

      await t.step("a re-keyed row is verified again, and the old key stops working", async () => {
        const original = await newKey();
        const replacement = await newKey();
        ok((await authenticate({ ...token, "MCP-API-Key": original.key })).ok);
        // Give the original prefix the replacement's hash: the cached success must not apply.
        await db.query(
          `UPDATE mcp_api_keys AS a SET key_hash = b.key_hash, salt = b.salt
             FROM mcp_api_keys AS b WHERE a.key_prefix = $1 AND b.key_prefix = $2`,
          [original.prefix, replacement.prefix],
        );
        const runs = scryptRuns;
        const f = failure(await authenticate({ ...token, "MCP-API-Key": original.key }));
        strictEqual(f.message, "invalid API key");
        strictEqual(scryptRuns, runs + 1);
      });

      await t.step(
        "concurrent first requests for one key share one scrypt; failures are not cached",
        async () => {
          const key = await newKey();
          const fresh = make();
          const runs = scryptRuns;
          const results = await Promise.all(
            Array.from(
              { length: 8 },
              () => authenticate({ ...token, "MCP-API-Key": key.key }, fresh),
            ),
          );
          ok(results.every((r) => r.ok));
          strictEqual(scryptRuns - runs, 1);
          ok((await authenticate({ ...token, "MCP-API-Key": key.key }, fresh)).ok);
          strictEqual(scryptRuns - runs, 1, "within the TTL no new scrypt");
          const wrong = key.key.slice(0, -3) + (key.key.endsWith("abc") ? "xyz" : "abc");
          failure(await authenticate({ ...token, "MCP-API-Key": wrong }, fresh));
          failure(await authenticate({ ...token, "MCP-API-Key": wrong }, fresh));
          strictEqual(scryptRuns - runs, 3, "each failed verification runs scrypt again");
          await fresh.close();
        },
      );

      await t.step(
        "an active key is never re-verified: the success TTL slides with use",
        async () => {
          const key = await newKey();
          const sliding = make({ cacheTtlMs: 1_000 });
          ok((await authenticate({ ...token, "MCP-API-Key": key.key }, sliding)).ok);
          const runs = scryptRuns;
          // 2.5 s of use every 100 ms (the gaps are far below the TTL even on a loaded machine):
          // a fixed TTL would have expired twice.
          for (let i = 0; i < 25; i++) {
            await sleep(100);
            ok((await authenticate({ ...token, "MCP-API-Key": key.key }, sliding)).ok);
          }
          strictEqual(scryptRuns, runs, "no scrypt while the key stays in use");
          await sleep(1_100); // idle for longer than the TTL
          ok((await authenticate({ ...token, "MCP-API-Key": key.key }, sliding)).ok);
          strictEqual(scryptRuns, runs + 1, "verified again after an idle TTL");
          await sliding.close();
        },
      );

      await t.step("last_used_at is written once per window, in the background", async () => {
        const key = await newKey();
        const writes: Array<boolean | Error> = [];
        // A window longer than this step takes on any machine: "inside the window" holds
        // however slow the steps below are (a short one fails on a busy machine, not the code).
        const WINDOW_MS = 600_000;
        const a = make({
          lastUsedIntervalMs: WINDOW_MS,
          onLastUsedWrite: (_p, r) => writes.push(r),
        });
        const lastUsed = async () =>
          (await db.query<{ t: Date | null }>(
            "SELECT last_used_at AS t FROM mcp_api_keys WHERE key_prefix = $1",
            [
              key.prefix,
            ],
          ))[0].t;
        strictEqual(await lastUsed(), null);
        ok((await authenticate({ ...token, "MCP-API-Key": key.key }, a)).ok);
        await a.settle();
        const first = await lastUsed();
        ok(first instanceof Date);
        deepStrictEqual(writes, [true]);
        for (let i = 0; i < 3; i++) {
          ok((await authenticate({ ...token, "MCP-API-Key": key.key }, a)).ok);
        }
        await a.settle();
        deepStrictEqual(writes, [true], "no write inside the window");
        strictEqual((await lastUsed())?.getTime(), first.getTime());
        // Another process inside the window: its conditional UPDATE changes nothing.
        const otherWrites: Array<boolean | Error> = [];
        const other = make({
          lastUsedIntervalMs: WINDOW_MS,
          onLastUsedWrite: (_p, r) => otherWrites.push(r),
        });
        ok((await authenticate({ ...token, "MCP-API-Key": key.key }, other)).ok);
        await other.settle();
        deepStrictEqual(otherWrites, [false]);
        strictEqual((await lastUsed())?.getTime(), first.getTime());
        // Once the window has passed — a window of 5 ms, which every pause here outlasts — the
        // process writes again, each time its own window has passed.
        const quickWrites: Array<boolean | Error> = [];
        const quick = make({
          lastUsedIntervalMs: 5,
          onLastUsedWrite: (_p, r) => quickWrites.push(r),
        });
        for (let i = 1; i <= 2; i++) {
          await sleep(10);
          ok((await authenticate({ ...token, "MCP-API-Key": key.key }, quick)).ok);
          await quick.settle();
          deepStrictEqual(quickWrites, Array(i).fill(true));
        }
        ok((await lastUsed())!.getTime() > first.getTime());
        strictEqual(
          await touchLastUsed(db, key.prefix, 60_000),
          false,
          "the SQL itself honours the window",
        );
        await a.close();
        await other.close();
        await quick.close();
      });

      await t.step(
        "a slow or failing last_used_at write neither delays nor fails the request",
        async () => {
          const key = await newKey();
          let updates = 0;
          let writeDone = false;
          const slowWrites: Queryable = {
            async query<T extends Row = Row>(
              text: string,
              params?: readonly SqlParam[],
              options?: { timeoutMs?: number },
            ) {
              if (text.trimStart().startsWith("UPDATE")) {
                updates++;
                await sleep(1_500);
                writeDone = true;
              }
              return await db.query<T>(text, params, options);
            },
          };
          const slow = make({ db: slowWrites, lastUsedIntervalMs: 0 });
          ok((await authenticate({ ...token, "MCP-API-Key": key.key }, slow)).ok);
          strictEqual(updates, 1);
          // Ordering, not timing: the request was answered while its write still ran.
          strictEqual(writeDone, false, "the request waited for the last_used_at write");
          await slow.close();

          const failingWrites: Queryable = {
            query<T extends Row = Row>(
              text: string,
              params?: readonly SqlParam[],
              options?: { timeoutMs?: number },
            ) {
              if (text.trimStart().startsWith("UPDATE")) {
                return Promise.reject(new Error("disk full"));
              }
              return db.query<T>(text, params, options);
            },
          };
          const results: Array<boolean | Error> = [];
          const failing = make({
            db: failingWrites,
            lastUsedIntervalMs: 60_000,
            onLastUsedWrite: (_p, r) => results.push(r),
          });
          ok((await authenticate({ ...token, "MCP-API-Key": key.key }, failing)).ok);
          await failing.settle();
          ok(results[0] instanceof Error);
          ok(
            captured.some((line) =>
              line.includes("could not update last_used_at") && line.includes(key.prefix)
            ),
          );
          // The failed attempt is forgotten, so the next request tries again despite the window.
          ok((await authenticate({ ...token, "MCP-API-Key": key.key }, failing)).ok);
          await failing.settle();
          strictEqual(results.length, 2);
          await failing.close();
        },
      );

      await t.step(
        "database stopped mid-run: 503 (even for a cached key), then recovery",
        async () => {
          ok(
            (await authenticate({ ...token, "MCP-API-Key": writeKey.key })).ok,
            "cached before the outage",
          );
          await proxy.down();
          const f = failure(await authenticate({ ...token, "MCP-API-Key": writeKey.key }));
          strictEqual(f.status, 503);
          match(f.message, /authentication database unavailable/);
          await proxy.up();
          await eventually(
            "recovery",
            async () => (await authenticate({ ...token, "MCP-API-Key": writeKey.key })).ok,
          );
        },
      );

      await t.step("slow database: 503 after the bounded wait, then recovery", async () => {
        const bounded = make({ dbTimeoutMs: 1_000 });
        proxy.setDelay(4_000);
        const started = performance.now();
        const f = failure(await authenticate({ ...token, "MCP-API-Key": writeKey.key }, bounded));
        const waited = performance.now() - started;
        // The 503 itself shows the bound fired: the delayed answer (4 s) would have let the key
        // in. It fired no earlier than the configured wait.
        strictEqual(f.status, 503);
        ok(waited >= 950, `gave up after ${waited} ms, before the 1,000 ms wait`);
        proxy.setDelay(0);
        await eventually(
          "recovery",
          async () => (await authenticate({ ...token, "MCP-API-Key": writeKey.key }, bounded)).ok,
        );
        await bounded.close();
      });

      await t.step(
        "stalled database: stuck lookups are abandoned after the wait, then new ones refused at once",
        async () => {
          const stalled = make({ dbTimeoutMs: 300, maxConcurrentLookups: 1 });
          proxy.setDelay(3_000);
          // Four distinct prefixes, one after the other: each query outlives the wait.
          for (let i = 0; i < 4; i++) {
            const f = failure(
              await authenticate(
                { ...token, "MCP-API-Key": `guinness_Stalled${i}abcd_${"x".repeat(43)}` },
                stalled,
              ),
            );
            strictEqual(f.status, 503);
          }
          // Refused at once: by the stalled-lookups check, which answers before any wait starts
          // (its own log line), not by a wait of its own running out.
          const outlived = () =>
            captured.filter((line) => line.includes("key lookups outlived the 300 ms wait")).length;
          const before = outlived();
          const f = failure(await authenticate({ ...token, "MCP-API-Key": writeKey.key }, stalled));
          strictEqual(f.status, 503);
          strictEqual(outlived(), before + 1, "refused by the stalled-lookups check");
          proxy.setDelay(0);
          await eventually(
            "recovery",
            async () => (await authenticate({ ...token, "MCP-API-Key": writeKey.key }, stalled)).ok,
          );
          await stalled.close();
        },
      );

      await t.step(
        "300 simultaneous valid requests are all served (no fixed lookup budget)",
        async () => {
          const many = make();
          const results = await Promise.all(
            Array.from(
              { length: 300 },
              (_, i) =>
                authenticate({ ...token, "MCP-API-Key": (i % 2 ? readKey : writeKey).key }, many),
            ),
          );
          strictEqual(results.filter((r) => r.ok).length, 300);
          await many.close();
        },
      );

      await t.step(
        "a flood of random unknown prefixes queues behind a valid key instead of refusing it",
        async () => {
          // A wait far longer than the flood takes to drain on any machine: queued, not refused
          // (the bounded wait has its own steps above).
          const flooded = make({ dbTimeoutMs: 600_000 });
          ok((await authenticate({ ...token, "MCP-API-Key": readKey.key }, flooded)).ok);
          const flood = Array.from(
            { length: 300 },
            (_, i) =>
              flooded.authenticate(
                request({
                  ...token,
                  "MCP-API-Key": `guinness_Rnd${String(i).padStart(9, "0")}_${"r".repeat(43)}`,
                }),
              ),
          );
          const valid = await authenticate({ ...token, "MCP-API-Key": readKey.key }, flooded);
          ok(valid.ok, `the valid key got ${JSON.stringify(valid)}`);
          const outcomes = await Promise.all(flood);
          ok(outcomes.every((o) => !o.ok && o.status === 401), "every unknown prefix is a 401");
          await flooded.close();
        },
      );

      await t.step(
        "a wrong-secret flood on one prefix: scrypt bounded, owner and a fresh key still pass",
        async () => {
          const victim = await newKey();
          const fresh = await newKey();
          const flooded = make({ failuresPerMinute: 5 });
          ok((await authenticate({ ...token, "MCP-API-Key": victim.key }, flooded)).ok);
          const runs = scryptRuns;
          const wrong = (i: number) =>
            `guinness_${victim.prefix}_${String(i).padStart(4, "0")}${"Q".repeat(39)}`;
          const flood = Array.from(
            { length: 64 },
            (_, i) => authenticate({ ...token, "MCP-API-Key": wrong(i) }, flooded),
          );
          const owner = authenticate({ ...token, "MCP-API-Key": victim.key }, flooded);
          const other = authenticate({ ...token, "MCP-API-Key": fresh.key }, flooded);
          ok((await owner).ok, "the cached owner is not locked out");
          ok((await other).ok, "another key is verified during the flood");
          const outcomes = await Promise.all(flood);
          ok(outcomes.every((o) => !o.ok && (o.status === 401 || o.status === 503)));
          const floodRuns = scryptRuns - runs - 1; // minus the fresh key's run
          ok(floodRuns <= 5, `the flood ran scrypt ${floodRuns} times (budget 5)`);
          // The budget is spent: another guess is refused without scrypt, like a wrong secret.
          const before = scryptRuns;
          const f = failure(await authenticate({ ...token, "MCP-API-Key": wrong(99) }, flooded));
          strictEqual(f.status, 401);
          strictEqual(f.message, "invalid API key");
          strictEqual(scryptRuns, before);
          // Hundreds of refusals, but one log line per prefix and reason a minute.
          for (let i = 0; i < 200; i++) {
            await authenticate({ ...token, "MCP-API-Key": wrong(100 + i) }, flooded);
          }
          strictEqual(
            captured.filter((line) =>
              line.includes("failure budget spent") && line.includes(victim.prefix)
            ).length,
            1,
          );
          ok((await authenticate({ ...token, "MCP-API-Key": victim.key }, flooded)).ok);
          await flooded.close();
        },
      );

      await t.step(
        "wrong secrets from one source do not lock out the owner elsewhere, uncached; many sources are paced",
        async () => {
          const victim = await newKey();
          // No success cache: every request of the owner runs scrypt, as after a restart.
          const perSource = make({ failuresPerMinute: 3, cacheTtlMs: 0 });
          const wrong = (i: number) =>
            `guinness_${victim.prefix}_${String(i).padStart(4, "0")}${"Q".repeat(39)}`;
          const from = (headers: Record<string, string>, source: string) =>
            perSource.authenticate(request({ ...token, ...headers }), source);
          for (let i = 0; i < 20; i++) await from({ "MCP-API-Key": wrong(i) }, "198.51.100.1");
          const before = scryptRuns;
          const spent = failure(await from({ "MCP-API-Key": wrong(50) }, "198.51.100.1"));
          strictEqual(spent.status, 401);
          strictEqual(scryptRuns, before, "the attacker's source is refused without scrypt");
          for (let i = 0; i < 3; i++) {
            ok((await from({ "MCP-API-Key": victim.key }, "203.0.113.5")).ok, `owner try ${i}`);
          }
          strictEqual(scryptRuns, before + 3, "the owner was verified each time, not cached");
          // Three more attacking sources put the prefix under attack: a source that never
          // verified it shares a paced allowance, the owner's source is not paced.
          for (const source of ["198.51.100.2", "198.51.100.3"]) {
            for (let i = 0; i < 3; i++) await from({ "MCP-API-Key": wrong(100 + i) }, source);
          }
          let paced: AuthOutcome | undefined;
          for (let i = 0; i < 10 && (paced === undefined || paced.ok); i++) {
            paced = await from({ "MCP-API-Key": wrong(200 + i) }, `192.0.2.${i + 1}`);
            if (!paced.ok && paced.status === 401) paced = undefined; // a paced slot was used
          }
          const f = failure(paced!);
          strictEqual(f.status, 503);
          match(f.message, /from many addresses; verifications of it are paced/);
          ok(((paced as { retryAfterSeconds?: number }).retryAfterSeconds ?? 0) >= 1);
          ok(
            (await from({ "MCP-API-Key": victim.key }, "203.0.113.5")).ok,
            "the owner still passes",
          );
          await perSource.close();
        },
      );

      await t.step("a full verification queue is 503 with Retry-After: 1 at once", async () => {
        let open!: () => void;
        const gateOpen = new Promise<void>((resolve) => open = resolve);
        const slowScrypt: ScryptFunction = async (password, salt) => {
          await gateOpen;
          return await nodeScrypt(password, salt);
        };
        const busy = make({ maxConcurrentScrypt: 1, verifyQueueLimit: 1, scrypt: slowScrypt });
        const keys3 = [await newKey(), await newKey(), await newKey()];
        const first = authenticate({ ...token, "MCP-API-Key": keys3[0].key }, busy);
        const second = authenticate({ ...token, "MCP-API-Key": keys3[1].key }, busy);
        await sleep(20);
        const f = failure(await authenticate({ ...token, "MCP-API-Key": keys3[2].key }, busy));
        strictEqual(f.status, 503);
        strictEqual((f as { retryAfterSeconds?: number }).retryAfterSeconds, 1);
        match(f.message, /too many API key verifications/);
        open();
        ok((await first).ok && (await second).ok);
        ok((await authenticate({ ...token, "MCP-API-Key": keys3[2].key }, busy)).ok);
        await busy.close();
      });

      await t.step(
        "an unknown prefix is remembered briefly; a key with an extra _suffix is logged as a hash",
        async () => {
          const negative = make({ unknownPrefixCacheMs: 60_000 });
          const unknown = "guinness_Unknown12345_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ";
          strictEqual(
            failure(await authenticate({ ...token, "MCP-API-Key": unknown }, negative)).status,
            401,
          );
          await proxy.down();
          try {
            const f = failure(await authenticate({ ...token, "MCP-API-Key": unknown }, negative));
            strictEqual(f.status, 401, "answered from memory, not 503 from the stopped database");
          } finally {
            await proxy.up();
          }
          // The contract's pattern puts everything before the last "_" in the prefix.
          const suffixed = `${writeKey.key}_extra`;
          const secretPart = writeKey.key.slice(writeKey.key.lastIndexOf("_") + 1);
          const lines = captured.length;
          const f = failure(await authenticate({ ...token, "MCP-API-Key": suffixed }, negative));
          strictEqual(f.message, "invalid API key");
          const logged = captured.slice(lines).join("");
          match(logged, /"keyPrefixSha256":"[0-9a-f]{16}","keyPrefixLength":\d+/);
          ok(!logged.includes(secretPart), "the secret inside the parsed prefix is not logged");
          await negative.close();
        },
      );

      await t.step("no secret in any log line or outcome message", async () => {
        await auth.settle();
        const stored = await db.query<{ key_hash: string; salt: string }>(
          "SELECT key_hash, salt FROM mcp_api_keys",
        );
        const secrets = [
          ...keys,
          ...keys.map((k) => k.slice(k.lastIndexOf("_") + 1)),
          ...stored.flatMap((r) => [r.key_hash, r.salt]),
          cfSecret,
          test.password,
        ];
        const text = captured.join("") + "\n" + outcomes.map((o) => JSON.stringify(o)).join("\n");
        ok(captured.length > 20, `the capture saw ${captured.length} log lines`);
        ok(text.includes("request refused"), "log lines were captured");
        for (const secret of secrets) {
          ok(secret.length >= 16, "every secret is long enough for a meaningful search");
          ok(
            !text.includes(secret),
            `a secret (${secret.slice(0, 4)}…) appeared in the logs or messages`,
          );
        }
      });

      await auth.close();
    } finally {
      stderr.writeSync = originalWrite;
      setLogLevel("info");
      await test.close();
    }
  },
});
