/**
 * A shared deployment is fair to every tenant, end to end: the app over
 * real HTTP (tiny models), API keys in a real PostgreSQL (`DATABASE_URL`,
 * else embedded), attackers and victims as separate clients on distinct
 * loopback addresses (127.0.0.2, …; Linux routes all of 127.0.0.0/8 to
 * the loopback interface). Each attack runs while a victim measures its
 * own requests: they must all succeed, and be served as the victim is served
 * without the attack — judged against the victim's own latency measured in
 * the same test just before (a ratio), or by being served ahead of the
 * attacker's backlog — never against a fixed number of milliseconds, which
 * would fail for a busy machine rather than for the product (the absolute
 * figures are logged for reading). The attacks are sized for a 2-core
 * machine shared with other tests, but are the findings' own: more idle
 * connections than `max_connections`, the 8,000 scan JPEG, wrong secrets far
 * over `failures_per_minute`.
 */

import assert from "node:assert/strict";
import type net from "node:net";
import { paddedScanFlood, scanFloodJpeg } from "./fixtures/jpeg_fixtures.ts";
import { sharpLib as sharp } from "../mod/image/sharp.ts";
import { mcpPostFrom, openFrom, type RawResponse } from "./helpers/from_address.ts";
import { createTestKey as createKey } from "./helpers/log_secrets.ts";
import { ownTcpListeners, ownUnixSockets } from "./helpers/own_sockets.ts";
import { openTestDatabase, type TestDatabase } from "./helpers/postgres.ts";
import { writeTinyConfig } from "./helpers/tiny_config.ts";
import { ignoredFor } from "./helpers/ignore.ts";
import { startAppFromConfig } from "./helpers/app_from_config.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The 99th percentile of `values` (nearest rank). */
function p99(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil(sorted.length * 0.99) - 1)];
}

/** The median of `values`. */
function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[sorted.length >> 1];
}

/**
 * How much slower the victim may be under an attack than without it, by
 * median, measured back to back in the same test: a victim that waits for
 * the attacker (a slot freed only when an idle connection times out, a
 * lookup queued behind the attacker's scrypt work) is tens of times slower,
 * while the load of other processes on the machine slows both measurements
 * alike.
 */
const MAX_SLOWDOWN = 5;

/** Asserts the victim's median under attack is within {@link MAX_SLOWDOWN} of its median alone. */
function assertNotSlowedDown(alone: number[], attacked: number[]): void {
  const ratio = median(attacked) / median(alone);
  assert.ok(
    ratio <= MAX_SLOWDOWN,
    `victim median ${median(attacked).toFixed(0)} ms under attack, ${
      median(alone).toFixed(0)
    } ms alone: ${ratio.toFixed(1)}x (at most ${MAX_SLOWDOWN}x)`,
  );
}

/** The JSON-RPC messages of an SSE (or JSON) response body. */
function messages(body: string): Array<Record<string, unknown>> {
  const lines = body.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6));
  if (lines.length === 0 && body.trim().startsWith("{")) lines.push(body);
  return lines.map((l) => JSON.parse(l));
}

/** The text of a tools/call result, with whether it is an error. */
function toolResult(response: RawResponse): { isError: boolean; text: string } {
  const result = messages(response.body).find((m) => "result" in m)?.result as
    | { isError?: boolean; content: Array<{ type: string; text?: string }> }
    | undefined;
  assert.ok(result, `no result in ${response.status}: ${response.body.slice(0, 300)}`);
  return {
    isError: result.isError === true,
    text: result.content.filter((c) => c.type === "text").map((c) => c.text).join("\n"),
  };
}

/** A POST /mcp from loopback address `from` with API key `key`. */
function mcp(from: string, port: number, key: string, body: unknown, timeoutMs = 60_000) {
  return mcpPostFrom(from, port, key, JSON.stringify(body), timeoutMs);
}

const listTools = { jsonrpc: "2.0", id: 1, method: "tools/list" };

function call(name: string, args: Record<string, unknown>) {
  return { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name, arguments: args } };
}

/** A 64×64 PNG of one colour, in base64. */
async function solidPng(background: { r: number; g: number; b: number }): Promise<string> {
  const png = await sharp({ create: { width: 64, height: 64, channels: 3, background } }).png()
    .toBuffer();
  return new Uint8Array(png).toBase64();
}

/** Runs `request` `count` times in a row; returns each latency in ms (all must answer 200). */
async function measure(
  count: number,
  request: () => Promise<RawResponse>,
  check: (r: RawResponse) => void = () => {},
): Promise<number[]> {
  const latencies: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    const response = await request();
    latencies.push(performance.now() - started);
    assert.equal(response.status, 200, `victim request ${i}: ${response.body.slice(0, 300)}`);
    check(response);
  }
  return latencies;
}

/**
 * Keeps `perAddress` connections open from each of `addresses`, sending
 * nothing; one that is closed is opened again after `reopenMs`.
 */
function idleFlood(port: number, addresses: string[], perAddress: number, reopenMs: number) {
  let stopped = false;
  const open = new Set<net.Socket>();
  let opened = 0;
  let attempts = 0;
  let turnedAway = 0;
  const keep = async (from: string) => {
    while (!stopped) {
      attempts++;
      try {
        const socket = await openFrom(from, port);
        opened++;
        open.add(socket);
        let answered = false;
        socket.on("data", () => answered = true);
        await new Promise((r) => socket.once("close", r));
        open.delete(socket);
        if (answered) turnedAway++;
      } catch { /* refused: try again */ }
      if (!stopped) await sleep(reopenMs);
    }
  };
  const loops = addresses.flatMap((a) => Array.from({ length: perAddress }, () => keep(a)));
  return {
    get open() {
      return open.size;
    },
    get opened() {
      return opened;
    },
    /** Connects tried (some fail while the listen queue is full). */
    get attempts() {
      return attempts;
    },
    get turnedAway() {
      return turnedAway;
    },
    async stop() {
      stopped = true;
      for (const socket of open) socket.destroy();
      await Promise.all(loops);
    },
  };
}

/** The app over HTTP on `tdb` with the tiny models, guided and inpaint enabled, and `toml`. */
async function startTenantApp(
  tdb: TestDatabase,
  toml = "",
  server: Record<string, number> = { header_timeout_seconds: 3 },
) {
  const temp = await writeTinyConfig(
    `${toml}[generation]\nsteps = 2\n` +
      `[controlnet.depth]\nenabled = true\n[controlnet.inpaint]\nenabled = true\n`,
    server,
  );
  const app = await startAppFromConfig(temp.path, tdb.url);
  return {
    http: app.http,
    async shutdown() {
      await app.shutdown();
      await temp.remove();
    },
  };
}

Deno.test({
  ...ignoredFor(
    Deno.build.os === "linux" ? undefined : "not Linux (distinct loopback peers and /proc)",
    "tenants: idle connections, JPEG scans, guessed secrets and the inner port cannot refuse others",
  ),
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const tdb = await openTestDatabase("tenants");
    const owner = await createKey(tdb.db, { projectId: 1, userId: 1, permission: "write" });
    const attacker = await createKey(tdb.db, { projectId: 2, userId: 2, permission: "write" });
    const listenersBefore = ownTcpListeners();
    const app = await startTenantApp(tdb);
    const port = app.http!.port;
    try {
      await t.step(
        "the inner server is no TCP port: a Unix socket in a 0700 directory",
        async () => {
          const added = [...ownTcpListeners()].filter((inode) => !listenersBefore.has(inode));
          assert.equal(added.length, 1, `TCP listeners opened by the server: ${added.length}`);
          const unix = ownUnixSockets(/\/sd15-mcp-http-[^/]+\/http\.sock$/);
          assert.ok(unix.length >= 1, "no inner Unix socket found");
          const dir = unix[0].slice(0, unix[0].lastIndexOf("/"));
          const info = Deno.statSync(dir);
          assert.equal(info.mode! & 0o777, 0o700, `mode ${(info.mode! & 0o777).toString(8)}`);
          assert.equal(info.uid, Deno.uid());
          if (Deno.uid() === 0) {
            // Another account cannot even reach the socket to skip the guard.
            const tried = await new Deno.Command("/usr/bin/setpriv", {
              args: [
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "/usr/bin/python3",
                "-c",
                `import socket; s = socket.socket(socket.AF_UNIX); s.connect(${
                  JSON.stringify(unix[0])
                })`,
              ],
              stderr: "piped",
            }).output();
            assert.equal(tried.success, false, "nobody connected to the inner socket");
            assert.match(
              new TextDecoder().decode(tried.stderr),
              /PermissionError|Permission denied/,
            );
          }
        },
      );

      await t.step("a streamed answer carries one connection header, close", async () => {
        const r = await mcp("127.0.0.9", port, owner.key, listTools);
        assert.equal(r.status, 200);
        assert.ok(r.headers.some(([k, v]) => k === "content-type" && /event-stream/.test(v)));
        const connection = r.headers.filter(([k]) => k === "connection").map(([, v]) => v);
        assert.deepEqual(connection, ["close"]);
      });

      await t.step(
        "550 idle connections from six addresses (max_connections 512): another client's requests pass, not slowed down",
        async () => {
          const alone = await measure(40, () => mcp("127.0.0.9", port, owner.key, listTools));
          const flood = idleFlood(
            port,
            ["127.0.0.2", ...[3, 4, 5, 6, 7].map((i) => `127.0.0.${i}`)].flatMap((a, i) =>
              i === 0 ? Array(6).fill(a) : [a]
            ),
            50,
            3_000,
          );
          try {
            for (let i = 0; i < 50 && flood.open < 150; i++) await sleep(100);
            const latencies = await measure(40, () => mcp("127.0.0.9", port, owner.key, listTools));
            const attackOpen = flood.open;
            console.error(
              `idle flood: ${flood.attempts} connects tried, ${flood.opened} made, ` +
                `${flood.turnedAway} answered and closed, ` +
                `${attackOpen} open; victim median ${median(alone).toFixed(0)} ms alone, under ` +
                `attack median ${median(latencies).toFixed(0)} ms, p99 ` +
                `${p99(latencies).toFixed(0)} ms, max ${Math.max(...latencies).toFixed(0)} ms`,
            );
            assert.ok(flood.attempts >= 550, `the attack tried ${flood.attempts} connections`);
            assert.ok(flood.opened >= 300, `the attack opened ${flood.opened} connections`);
            // A refused connection that sends nothing is answered at its header deadline
            // (header_timeout_seconds = 3 here), not at once: wait for that, bounded.
            for (let i = 0; i < 100 && flood.turnedAway === 0; i++) await sleep(100);
            assert.ok(flood.turnedAway > 0, "no attacking connection was refused or closed");
            assertNotSlowedDown(alone, latencies);
          } finally {
            await flood.stop();
          }
        },
      );

      await t.step(
        "40 wrong secrets for the owner's prefix from one address: the uncached owner elsewhere passes, not slowed down",
        async () => {
          // No success cache: every request of the owner runs scrypt, as after a restart or at
          // another replica (the case the lockout hit).
          const uncached = await startTenantApp(tdb, "[auth]\ncache_seconds = 0\n");
          const port = uncached.http!.port;
          // The owner alone, uncached (scrypt at every request) on the same app: its baseline.
          const alone = await measure(20, () => mcp("127.0.0.3", port, owner.key, listTools));
          const wrong = (i: number) =>
            `guinness_${owner.prefix}_${String(i).padStart(4, "0")}${"Q".repeat(39)}`;
          let stopped = false;
          const statuses: number[] = [];
          const guessing = (async () => {
            for (let i = 0; i < 40 && !stopped; i++) {
              statuses.push((await mcp("127.0.0.2", port, wrong(i), listTools)).status);
              await sleep(100);
            }
          })();
          try {
            await sleep(1_500); // past failures_per_minute (10) from the attacker
            const latencies = await measure(20, () => mcp("127.0.0.3", port, owner.key, listTools));
            await guessing;
            console.error(
              `guessing: ${statuses.length} wrong secrets (${
                statuses.filter((s) => s === 401).length
              } answered 401); owner median ${median(alone).toFixed(0)} ms alone, under the ` +
                `guessing ${median(latencies).toFixed(0)} ms, p99 ${p99(latencies).toFixed(0)} ms`,
            );
            assert.ok(statuses.length >= 20 && statuses.every((s) => s === 401), statuses.join());
            assertNotSlowedDown(alone, latencies);
          } finally {
            stopped = true;
            await guessing;
            await uncached.shutdown();
          }
        },
      );

      await t.step(
        "the 8,000-scan JPEG is refused as corrupt at once; one key's slow decodes leave a slot to another key, served ahead of their backlog",
        async () => {
          // Its own app, whose request heads may take long to arrive: this process is the
          // clients and the server at once, and building a 26 MB request stalls both for a while
          // on a busy machine (the idle-connection flood above needs the 3 s head timeout).
          const decodeApp = await startTenantApp(tdb, "", { header_timeout_seconds: 60 });
          const tool = (from: string, key: string, name: string, args: Record<string, unknown>) =>
            mcp(from, decodeApp.http!.port, key, call(name, args));
          try {
            // The finding's file: a real progressive JPEG, one 0x00 before the first SOS, its
            // smallest scan repeated to 8,000 scans (19.8 MB).
            const evil = (await paddedScanFlood()).padded;
            assert.ok(evil.length > 15_000_000, `${evil.length} bytes`);
            const started = performance.now();
            const refused = toolResult(
              await tool("127.0.0.4", attacker.key, "generate_guided_image", {
                positive_prompt: "x",
                control_mode: "depth",
                input_image: evil.toBase64(),
              }),
            );
            const refusedMs = performance.now() - started;
            assert.equal(refused.isError, true);
            assert.match(refused.text, /input_image: the JPEG is corrupt: byte 0x00 at offset \d+/);
            console.error(`the 19.8 MB JPEG was refused in ${refusedMs.toFixed(0)} ms`);

            // Slow but valid: 100 scans over a 16-megapixel frame (about 0.9 s to decode and
            // resize on a 2-core x86-64 VM), four at a time from the attacker, each refused only
            // after its decode (an all-black mask), so they hold decode slots and queue no job.
            const heavy = scanFloodJpeg({ size: 4096, acScans: 99 }).toBase64();
            // Refused after its decode (an all-black mask), or, on a machine too busy to decode
            // within the product's decode timeout, by that timeout: either way it held a slot (the
            // timeout runs inside the slot) and queued no job.
            const DECODED = /mask_image has no pixel brighter|took longer than \d+ s to decode/;
            const black = await solidPng({ r: 0, g: 0, b: 0 });
            const small = await solidPng({ r: 90, g: 120, b: 200 });
            const victimCall = () =>
              tool("127.0.0.5", owner.key, "inpaint_image", {
                positive_prompt: "x",
                input_image: small,
                mask_image: black,
              });
            // The victim's own cost, for the log: two decode processes.
            const alone = await measure(5, victimCall);
            let stopped = false;
            const attackMs: number[] = [];
            /** When each of the attacker's calls was answered (its decodes end one at a time). */
            const attackDone: number[] = [];
            const attackLoop = async () => {
              while (!stopped) {
                const t0 = performance.now();
                const r = toolResult(
                  await tool("127.0.0.4", attacker.key, "inpaint_image", {
                    positive_prompt: "x",
                    input_image: heavy,
                    mask_image: black,
                  }),
                );
                attackDone.push(performance.now());
                attackMs.push(performance.now() - t0);
                assert.match(r.text, DECODED);
              }
            };
            const attacks = Array.from({ length: 4 }, attackLoop);
            try {
              await sleep(1_000);
              // Each victim call's span, to count the attacker's calls answered within it.
              const spans: Array<[number, number]> = [];
              const latencies = await measure(
                15,
                async () => {
                  const from = performance.now();
                  const r = await victimCall();
                  spans.push([from, performance.now()]);
                  return r;
                },
                (r) => assert.match(toolResult(r).text, DECODED),
              );
              const attackMedian = [...attackMs].sort((a, b) => a - b)[attackMs.length >> 1];
              console.error(
                `decodes: attacker calls ${attackMs.length}, median ${
                  attackMedian?.toFixed(0)
                } ms; ` +
                  `victim alone ${alone.map((l) => l.toFixed(0)).join(" ")} ms, under attack p99 ` +
                  `${p99(latencies).toFixed(0)} ms (${
                    latencies.map((l) => l.toFixed(0)).join(" ")
                  })`,
              );
              // Its calls queue behind its own one slot: some finished while the victim measured.
              assert.ok(attackMs.length >= 1, "no decode of the attacker finished");
              // The attacker's four calls share its one decode slot, so they end one decode apart.
              // A victim call queued behind them (a decode running and two waiting ahead of it on
              // two shared slots) would span at least three of those ends; one served by the free
              // slot spans at most two — one, unless the machine is so busy that its own small
              // decode lasts as long as the attacker's (both then run into the decode timeout) —
              // whatever the machine's speed.
              const overlaps = spans.map(([from, to]) =>
                attackDone.filter((t) => t > from && t < to).length
              );
              assert.ok(
                overlaps.every((n) => n <= 2),
                `attacker calls answered during each victim call: ${overlaps.join(" ")}`,
              );
            } finally {
              stopped = true;
              await Promise.all(attacks);
            }
          } finally {
            await decodeApp.shutdown();
          }
        },
      );

      await t.step("/healthz answers 503 with the reason while the database is down", async () => {
        const ok = await fetch(`http://127.0.0.1:${port}/healthz`);
        assert.equal(ok.status, 200);
        assert.equal((await ok.json()).status, "ok");
        await tdb.proxy.down();
        try {
          const down = await fetch(`http://127.0.0.1:${port}/healthz`);
          assert.equal(down.status, 503);
          assert.equal(down.headers.get("retry-after"), "5");
          const body = await down.json();
          assert.equal(body.status, "unavailable");
          assert.equal(body.database, "unavailable");
          assert.match(body.reason, /^the database is unavailable .*API keys cannot be checked/);
        } finally {
          await tdb.proxy.up();
        }
        let status = 0;
        for (let i = 0; i < 100 && status !== 200; i++) {
          const r = await fetch(`http://127.0.0.1:${port}/healthz`);
          status = r.status;
          await r.body?.cancel();
          if (status !== 200) await sleep(100);
        }
        assert.equal(status, 200, "healthy again once the database is back");
      });
    } finally {
      await app.shutdown();
      await tdb.close();
    }
  },
});
