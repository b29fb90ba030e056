/**
 * The key store under an operator's and an attacker's load: the
 * HTTP server with live authenticated traffic while concurrent `deno task
 * keys` processes create, revoke and delete keys; the database killed
 * mid-traffic; a full disk. Run on the embedded default always (whatever
 * `DATABASE_URL` says) and on the real PostgreSQL server when `DATABASE_URL`
 * is set.
 */

import assert from "node:assert/strict";
import { startApp } from "../mod/app/mod.ts";
import { STATEMENT_TIMEOUT_MS } from "../mod/auth/cli.ts";
import { type Database, openDatabase } from "../mod/db/mod.ts";
import { loadConfig } from "../mod/config/mod.ts";
import { makeReachableTempDir, openTestDatabase, type TestDatabase } from "./helpers/postgres.ts";
import { serveOnce } from "./helpers/serve_once.ts";
import { writeTinyConfig } from "./helpers/tiny_config.ts";
import { type KeysRun, runKeysCli } from "./helpers/keys_cli.ts";
import {
  fill,
  mountTmpfs,
  resizeTmpfs,
  tmpfsUnavailable,
  treeBytes,
  unmountTmpfs,
  usedBytes,
} from "./helpers/tmpfs.ts";
import { ignoredFor } from "./helpers/ignore.ts";
import { startAppFromConfig } from "./helpers/app_from_config.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A running server plus how its CLI reaches the same key store. */
interface Harness {
  mode: "embedded" | "server";
  port: number;
  /** Runs `deno task keys ARGS` against the server's key store. */
  keys(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }>;
  /** Stops the database under the server (embedded: SIGKILL the postmaster). */
  killDatabase(): Promise<void>;
  /** Lets it come back (embedded: the server restarts it by itself). */
  reviveDatabase(): Promise<void>;
  /** A pool of the test's own on the same key store (closed by close()). */
  connect(): Promise<Database>;
  close(): Promise<void>;
}

function runKeys(args: string[], env: Record<string, string>): Promise<KeysRun> {
  return runKeysCli(args, { env, clearEnv: true, quiet: true });
}

async function postmasterPid(dataDir: string): Promise<number> {
  const text = await Deno.readTextFile(`${dataDir}/postgres/data/postmaster.pid`);
  return Number(text.split("\n")[0]);
}

/**
 * The live traffic of these tests is many clients' load from one address (127.0.0.1), up to
 * 100 requests a second while the database is down: above one client's connect rate.
 */
const MANY_CLIENTS = { client_connections_per_second: 1000 };

/** Starts the server on the embedded default in `dataDir` (or the tiny config's own). */
async function embeddedHarness(configText?: (text: string) => string): Promise<Harness> {
  const temp = await writeTinyConfig("", MANY_CLIENTS);
  if (configText) {
    await Deno.writeTextFile(temp.path, configText(await Deno.readTextFile(temp.path)));
  }
  const config = await loadConfig({ path: temp.path, overrides: { transport: "http" }, env: {} });
  assert.equal(config.auth.databaseUrl, undefined, "the embedded default");
  const app = await startApp(config);
  const dataDir = config.server.dataDir;
  const pools: Database[] = [];
  return {
    mode: "embedded",
    port: app.http!.port,
    keys: (...args) => runKeys([...args, "--config", temp.path], {}),
    async killDatabase() {
      Deno.kill(await postmasterPid(dataDir), "SIGKILL");
    },
    async reviveDatabase() {},
    async connect() {
      // Joins the server's cluster as another process would.
      pools.push(await openDatabase({ embeddedDir: `${dataDir}/postgres`, maxConnections: 1 }));
      return pools.at(-1)!;
    },
    async close() {
      for (const pool of pools) await pool.close();
      await app.shutdown();
      await temp.remove();
    },
  };
}

async function serverHarness(): Promise<Harness> {
  const tdb: TestDatabase = await openTestDatabase("key_store_faults");
  const temp = await writeTinyConfig("", MANY_CLIENTS);
  const app = await startAppFromConfig(temp.path, tdb.url);
  return {
    mode: "server",
    port: app.http!.port,
    keys: (...args) => runKeys(args, { DATABASE_URL: tdb.url }),
    killDatabase: () => tdb.proxy.down(),
    reviveDatabase: () => tdb.proxy.up(),
    connect: () => tdb.connect({ maxConnections: 1, migrate: false }),
    async close() {
      await app.shutdown();
      await temp.remove();
      await tdb.close();
    },
  };
}

/** One authenticated tools/list; the status, bounded so that a hang fails the test. */
async function request(port: number, key: string): Promise<number> {
  const response = await fetch(`http://127.0.0.1:${port}/mcp`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      authorization: `Bearer ${key}`,
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    signal: AbortSignal.timeout(15_000),
  });
  await response.body?.cancel();
  return response.status;
}

/** `/healthz`: 200 while the database answers, 503 with the reason while it does not. */
async function health(port: number): Promise<{ status: string; database: string }> {
  const response = await fetch(`http://127.0.0.1:${port}/healthz`, {
    signal: AbortSignal.timeout(5_000),
  });
  const body = await response.json();
  if (body.database === "ok") {
    assert.equal(response.status, 200);
    assert.equal(body.status, "ok");
  } else {
    assert.equal(response.status, 503, JSON.stringify(body));
    assert.equal(body.status, "unavailable");
    assert.match(body.reason, /^the database is unavailable/);
  }
  return body;
}

/** Creates a key with the CLI; returns the key and its prefix. */
async function createKey(h: Harness, name: string): Promise<{ key: string; prefix: string }> {
  const run = await h.keys(
    "create",
    "--project",
    "none",
    "--user",
    "1",
    "--permission",
    "read",
    "--name",
    name,
  );
  assert.equal(run.code, 0, run.stderr);
  const key = run.stdout.trim().split("\n").at(-1)!;
  return { key, prefix: key.split("_")[1] };
}

/** Runs `fn` on every item, `width` at a time. */
async function inBatches<T, R>(items: T[], width: number, fn: (item: T) => Promise<R>) {
  const out: R[] = [];
  for (let i = 0; i < items.length; i += width) {
    out.push(...await Promise.all(items.slice(i, i + width).map(fn)));
  }
  return out;
}

/** Background traffic with `key` until stopped; records every status. */
function traffic(port: number, key: string, loops = 2) {
  const statuses: number[] = [];
  let running = true;
  const done = Promise.all(
    Array.from({ length: loops }, async () => {
      while (running) {
        statuses.push(await request(port, key).catch(() => -1));
        await sleep(20);
      }
    }),
  );
  return {
    statuses,
    async stop() {
      running = false;
      await done;
    },
  };
}

const modes: Array<"embedded" | "server"> = ["embedded"];
if (Deno.env.get("DATABASE_URL")) modes.push("server");

for (const mode of modes) {
  Deno.test({
    name: `key store (${mode}): concurrent keys CLIs during live traffic; a killed database`,
    sanitizeOps: false,
    sanitizeResources: false,
    async fn(t) {
      const h = mode === "embedded" ? await embeddedHarness() : await serverHarness();
      try {
        const steady = await createKey(h, "steady");
        assert.equal(await request(h.port, steady.key), 200);

        await t.step(
          "12 keys created and revoked 4 at a time: each revoke holds at once, no valid key is refused",
          async () => {
            const created = await inBatches(
              Array.from({ length: 12 }, (_, i) => `k${i}`),
              4,
              (name) => createKey(h, name),
            );
            const live = traffic(h.port, steady.key);
            // Keys not yet sent to revoke keep working throughout.
            const pending = new Set(created.map((k) => k.key));
            const others: number[] = [];
            let checking = true;
            const otherTraffic = (async () => {
              while (checking) {
                for (const key of [...pending]) {
                  const status = await request(h.port, key);
                  if (pending.has(key)) others.push(status);
                }
                await sleep(20);
              }
            })();
            try {
              for (let i = 0; i < created.length; i += 4) {
                const batch = created.slice(i, i + 4);
                for (const k of batch) pending.delete(k.key);
                const runs = await Promise.all(batch.map((k) => h.keys("revoke", k.prefix)));
                for (const [j, run] of runs.entries()) {
                  assert.equal(run.code, 0, run.stderr);
                  assert.match(run.stdout, new RegExp(`^API key ${batch[j].prefix} revoked$`, "m"));
                }
                for (const k of batch) {
                  assert.equal(await request(h.port, k.key), 401, `${k.prefix} still works`);
                }
              }
            } finally {
              checking = false;
              await otherTraffic;
              await live.stop();
            }
            assert.ok(live.statuses.length > 0);
            assert.deepEqual(
              live.statuses.filter((s) => s !== 200),
              [],
              "the steady key was refused",
            );
            assert.deepEqual(
              others.filter((s) => s !== 200),
              [],
              "a key not yet revoked was refused",
            );
            const listing = await h.keys("list");
            for (const k of created) {
              assert.match(listing.stdout, new RegExp(`^${k.prefix} .* revoked$`, "m"));
            }
            // Nothing matched: non-zero.
            const again = await h.keys("revoke", created[0].prefix);
            assert.equal(again.code, 1);
          },
        );

        await t.step("revoke A beside delete B: each applies to its own key", async () => {
          for (let round = 0; round < 3; round++) {
            const [a, b] = await Promise.all([
              createKey(h, `a${round}`),
              createKey(h, `b${round}`),
            ]);
            const [revoked, deleted] = await Promise.all([
              h.keys("revoke", a.prefix),
              h.keys("delete", b.prefix),
            ]);
            assert.equal(revoked.code, 0, revoked.stderr);
            assert.equal(deleted.code, 0, deleted.stderr);
            assert.match(revoked.stdout, new RegExp(`API key ${a.prefix} revoked`));
            assert.match(deleted.stdout, new RegExp(`API key ${b.prefix} deleted`));
            const listing = (await h.keys("list")).stdout;
            assert.match(listing, new RegExp(`^${a.prefix} .* revoked$`, "m"));
            assert.match(listing, new RegExp(`^${b.prefix} .* deleted$`, "m"));
            assert.equal(await request(h.port, a.key), 401);
            assert.equal(await request(h.port, b.key), 401);
          }
          assert.equal(await request(h.port, steady.key), 200);
        });

        await t.step(
          "a CLI never hangs on a locked table: it gives up after its bound",
          async () => {
            const db = await h.connect();
            let run: Awaited<ReturnType<Harness["keys"]>> | undefined;
            let waited = 0;
            await db.transaction(async (tx) => {
              await tx.query("LOCK TABLE mcp_api_keys IN ACCESS EXCLUSIVE MODE");
              const started = performance.now();
              run = await h.keys("revoke", steady.prefix);
              waited = performance.now() - started;
            });
            assert.equal(run!.code, 1, run!.stdout);
            assert.match(run!.stderr, /lock timeout|no answer within/);
            // The lock is held until the command ends: that it ended at all, with this message,
            // is its own bound firing (no earlier than set).
            assert.ok(waited >= STATEMENT_TIMEOUT_MS - 1_000, `gave up after ${waited} ms`);
            assert.equal(await request(h.port, steady.key), 200, "the revoke did not happen");
          },
        );

        await t.step(
          "the database killed mid-traffic: 503 (never a hang), then recovery",
          async () => {
            assert.equal((await health(h.port)).database, "ok");
            const live = traffic(h.port, steady.key);
            const healthSeen = new Set<string>();
            try {
              await sleep(300);
              await h.killDatabase();
              const downSince = Date.now();
              while (Date.now() - downSince < 1_500) {
                healthSeen.add((await health(h.port)).database);
                await sleep(100);
              }
              await h.reviveDatabase();
              const deadline = Date.now() + 60_000;
              while (Date.now() < deadline && await request(h.port, steady.key) !== 200) {
                await sleep(100);
              }
              await sleep(300);
            } finally {
              await live.stop();
            }
            const statuses = new Set(live.statuses);
            assert.ok(statuses.has(503), `no 503 while the database was down: ${[...statuses]}`);
            assert.ok(
              [...statuses].every((s) => s === 200 || s === 503),
              `only 200 or 503: ${[...statuses]}`,
            );
            // Recovered: sequential requests all pass again.
            for (let i = 0; i < 3; i++) {
              assert.equal(await request(h.port, steady.key), 200, "recovered");
            }
            if (mode === "embedded") {
              assert.ok(healthSeen.has("unavailable"), [...healthSeen].join());
            }
            let recovered = "";
            for (let i = 0; i < 50 && recovered !== "ok"; i++) {
              recovered = (await health(h.port)).database;
              if (recovered !== "ok") {
                await sleep(200);
              }
            }
            assert.equal(recovered, "ok");
            // And the CLI works again too.
            await createKey(h, "after");
          },
        );
      } finally {
        await h.close();
      }
    },
  });
}

const noTmpfs = await tmpfsUnavailable();

/** The tmpfs while the server starts: a limit, not memory taken (tmpfs uses what is written). */
const START_ROOM = 1 << 30;
/**
 * Free room once the server is up, for what it writes before the disk is
 * filled (a key, a checkpoint): three 16 MiB WAL segments.
 */
const HEADROOM = 48 << 20;
const mib = (bytes: number) => (bytes / (1 << 20)).toFixed(1);

Deno.test({
  ...ignoredFor(
    noTmpfs,
    "key store (embedded): a full disk is 503 and a clear start-up error, then recovery",
  ),
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const mountPoint = await makeReachableTempDir("sdmcp-fulldisk-");
    // Room for whatever start-up puts there: the cluster, and a copy of the
    // PostgreSQL binaries when the checkout is out of the postgres account's
    // reach (as root, under a 0700 home). Sized to fit once it is in place.
    await mountTmpfs(mountPoint, START_ROOM);
    const filler = `${mountPoint}/filler`;
    try {
      const h = await embeddedHarness((text) =>
        text.replace(/^data_dir = .*$/m, `data_dir = ${JSON.stringify(`${mountPoint}/data`)}`)
      );
      try {
        const held = await usedBytes(mountPoint);
        const binaries = await treeBytes(`${mountPoint}/data/postgres/pgsql`);
        await resizeTmpfs(mountPoint, held + HEADROOM);
        console.error(
          `full-disk tmpfs: ${mib(held)} MiB in place (${
            binaries ? `${mib(binaries)} MiB of it the copied PostgreSQL binaries` : "the cluster"
          }), sized ${mib(held + HEADROOM)} MiB`,
        );
        const steady = await createKey(h, "steady");
        assert.equal(await request(h.port, steady.key), 200);

        await fill(filler);
        // Writes on the full disk end, either way, within the CLI's statement bound.
        const write = await h.keys(
          "create",
          "--project",
          "none",
          "--user",
          "1",
          "--permission",
          "read",
        );
        console.error(`keys create on a full disk: exit ${write.code} ${write.stderr.trim()}`);
        assert.ok(
          write.code === 0 || /No space left on device|database unavailable/.test(write.stderr),
          `${write.code}: ${write.stderr}`,
        );
        // A full disk can make PostgreSQL abort (a PANIC on a failed WAL
        // write); the kill stands in for that, and the restart happens on the
        // full disk.
        await h.killDatabase();
        const statuses: number[] = [];
        const healthSeen = new Set<string>();
        const since = Date.now();
        while (Date.now() - since < 3_000) {
          statuses.push(await request(h.port, steady.key));
          healthSeen.add((await health(h.port)).database);
          await sleep(100);
        }
        assert.ok(statuses.every((s) => s === 200 || s === 503), statuses.join());
        assert.ok(statuses.includes(503), `no 503 on a full disk: ${statuses.join()}`);
        assert.ok(healthSeen.has("unavailable"));

        await Deno.remove(filler);
        let status = 0;
        const deadline = Date.now() + 60_000;
        while (Date.now() < deadline && status !== 200) {
          status = await request(h.port, steady.key);
          if (status !== 200) await sleep(200);
        }
        assert.equal(status, 200, "recovered once space is back");
        assert.equal((await health(h.port)).database, "ok");
        await createKey(h, "after");
      } finally {
        await h.close();
      }

      // Start-up on a full disk: a message, not "[object Object]".
      await fill(filler);
      const temp = await writeTinyConfig();
      try {
        const text = (await Deno.readTextFile(temp.path)).replace(
          /^data_dir = .*$/m,
          `data_dir = ${JSON.stringify(`${mountPoint}/fresh`)}`,
        );
        await Deno.writeTextFile(temp.path, text);
        const run = await serveOnce(temp.path);
        const stderr = run.stderr;
        console.error(
          `start-up on a full disk: exit ${run.code} ${stderr.trim().split("\n").at(-1)}`,
        );
        assert.equal(run.code, 1, stderr);
        assert.match(stderr, /start-up failed: .*(No space left on device|could not)/);
        assert.doesNotMatch(stderr, /\[object Object\]/);
      } finally {
        await temp.remove();
      }
    } finally {
      await Deno.remove(filler).catch(() => {});
      await unmountTmpfs(mountPoint);
      await Deno.remove(mountPoint, { recursive: true }).catch(() => {});
    }
  },
});
