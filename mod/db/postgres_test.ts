import { ok, rejects, strictEqual } from "node:assert";
import { openTestDatabase } from "../../tests/helpers/postgres.ts";
import { DatabaseError } from "./database.ts";
import { ignoredFor } from "../../tests/helpers/ignore.ts";

Deno.test({
  name: "postgres.js wrapper",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const test = await openTestDatabase("postgres_wrapper");
    const { db, proxy } = test;
    try {
      await t.step("parameters and result types", async () => {
        const [row] = await db.query<{ a: string; t: Date; s: string | null; n: number }>(
          "SELECT $1::bigint AS a, $2::timestamptz AS t, $3::text AS s, $4::int AS n",
          ["9007199254740993", new Date(Date.UTC(2026, 0, 2, 3, 4, 5)), null, 41],
        );
        strictEqual(row.a, "9007199254740993", "int8 arrives as an exact string");
        ok(row.t instanceof Date);
        strictEqual(row.t.toISOString(), "2026-01-02T03:04:05.000Z");
        strictEqual(row.s, null);
        strictEqual(row.n, 41);
      });

      await t.step(
        "an SQL error is a DatabaseError with its SQLSTATE, not 'unavailable'",
        async () => {
          await rejects(db.query("SELECT * FROM no_such_table"), (e: unknown) => {
            ok(e instanceof DatabaseError);
            strictEqual(e.code, "42P01");
            strictEqual(e.unavailable, false);
            return true;
          });
        },
      );

      await t.step(
        "a transaction rolls back when its function throws, and the error passes through",
        async () => {
          await db.query("CREATE TABLE tx_test (v integer)");
          class Marker extends Error {}
          await rejects(
            db.transaction(async (tx) => {
              await tx.query("INSERT INTO tx_test VALUES (1)");
              throw new Marker("stop");
            }),
            (e: unknown) => e instanceof Marker,
          );
          strictEqual((await db.query("SELECT * FROM tx_test")).length, 0);
          await db.transaction(async (tx) => {
            await tx.query("INSERT INTO tx_test VALUES (2)");
          });
          strictEqual((await db.query<{ v: number }>("SELECT v FROM tx_test"))[0].v, 2);
        },
      );

      await t.step("a slow database gives up after timeoutMs with code TIMEOUT", async () => {
        proxy.setDelay(1_500);
        const started = performance.now();
        await rejects(db.query("SELECT 1", [], { timeoutMs: 200 }), (e: unknown) => {
          ok(e instanceof DatabaseError);
          strictEqual(e.code, "TIMEOUT");
          strictEqual(e.unavailable, true);
          ok(!e.message.includes(test.password), "no DSN password in the message");
          return true;
        });
        // TIMEOUT itself shows the bound fired (the delayed answer would have come back
        // fine); it fired no earlier than set.
        const waited = performance.now() - started;
        ok(waited >= 190, `waited ${waited} ms`);
        proxy.setDelay(0);
      });

      await t.step(
        "a stalled database: a statement and a transaction give up within their bound, `settled` says when what they abandoned ended, and the pool answers again once it resumes",
        async () => {
          await db.query("CREATE TABLE stall_test (v integer)");
          const bound = 300;
          let statement: Promise<void> | undefined;
          let transaction: Promise<void> | undefined;
          const timedOut = (keep: (settled: Promise<void>) => void) => (e: unknown) => {
            ok(e instanceof DatabaseError);
            strictEqual(e.code, "TIMEOUT");
            strictEqual(e.unavailable, true);
            keep(e.settled);
            return true;
          };
          proxy.stall();
          try {
            const started = performance.now();
            await rejects(
              db.query("INSERT INTO stall_test VALUES (1)", [], { timeoutMs: bound }),
              timedOut((settled) => statement = settled),
            );
            const waited = performance.now() - started;
            ok(waited >= bound - 10 && waited < bound + 2_000, `waited ${waited} ms`);
            // As a whole: postgres.js alone would wait for the ROLLBACK it sends after a failure.
            await rejects(
              db.transaction(async (tx) => {
                await tx.query("INSERT INTO stall_test VALUES (2)", [], { timeoutMs: 10_000 });
              }, { timeoutMs: bound }),
              timedOut((settled) => transaction = settled),
            );
            // Nothing the caller gave up on has ended while the database is stalled.
            const pending = new Promise((r) => setTimeout(() => r("pending"), 300));
            strictEqual(await Promise.race([statement!.then(() => "settled"), pending]), "pending");
          } finally {
            proxy.resume();
          }
          await statement;
          await transaction;
          // Both ran once the database resumed: what a caller gave up on may still take effect,
          // which is why a job's writes carry their claim's token (mod/jobs/postgres_store.ts).
          const rows = await db.query<{ v: number }>("SELECT v FROM stall_test ORDER BY v");
          strictEqual(rows.map((r) => r.v).join(","), "1,2");
        },
      );

      await t.step(
        "a stopped database is 'unavailable' without the password, and comes back",
        async () => {
          await proxy.down();
          await rejects(db.query("SELECT 1"), (e: unknown) => {
            ok(e instanceof DatabaseError);
            strictEqual(e.unavailable, true, `code ${e.code}`);
            ok(!e.message.includes(test.password), e.message);
            ok(e.message.includes(":***@"), e.message);
            return true;
          });
          await proxy.up();
          let rows: unknown[] = [];
          for (let i = 0; i < 50 && rows.length === 0; i++) {
            rows = await db.query("SELECT 1 AS one").catch(() => []);
            if (rows.length === 0) await new Promise((r) => setTimeout(r, 100));
          }
          strictEqual(rows.length, 1);
        },
      );
    } finally {
      await test.close();
    }
  },
});

Deno.test({
  ...ignoredFor(
    Deno.env.get("DATABASE_URL")
      ? undefined
      : "DATABASE_URL is unset (a PostgreSQL server is needed)",
    "postgres.js wrapper: LISTEN survives an outage; a transaction cut by one does not end the process",
  ),
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const test = await openTestDatabase("postgres_listen");
    const { db, proxy } = test;
    try {
      const heard: string[] = [];
      const listening = await db.listen!("sd15_test_channel", (payload) => heard.push(payload));
      await db.query("SELECT pg_notify('sd15_test_channel', 'before')");
      for (let i = 0; i < 100 && !heard.includes("before"); i++) {
        await new Promise((r) => setTimeout(r, 20));
      }
      ok(heard.includes("before"), "the first notification never arrived");

      // A transaction in flight when the database goes away: postgres.js 3.4.9
      // then throws from a timer; the wrapper must keep that from ending the process.
      const cut = db.transaction(async (tx) => {
        await tx.query("SELECT pg_sleep(1)");
      });
      await new Promise((r) => setTimeout(r, 200));
      await proxy.down();
      await rejects(cut, (e: unknown) => e instanceof DatabaseError && e.unavailable);
      await new Promise((r) => setTimeout(r, 300));
      await proxy.up();

      // Re-LISTENed a moment after the connection came back.
      for (let i = 0; i < 100 && !heard.includes("after"); i++) {
        await db.query("SELECT pg_notify('sd15_test_channel', 'after')").catch(() => {});
        await new Promise((r) => setTimeout(r, 100));
      }
      ok(heard.includes("after"), "not listening again after the outage");
      await listening.unlisten();
    } finally {
      await test.close();
    }
  },
});
