/**
 * The HTTP server's own parts without the app: start-up failure leaves
 * nothing behind, and `/healthz` answers by the health fields.
 */

import assert from "node:assert/strict";
import { healthResponse, withDatabase } from "./health.ts";
import { startHttpServer } from "./server.ts";
import { ownUnixSockets } from "../../tests/helpers/own_sockets.ts";
import { ignoredFor } from "../../tests/helpers/ignore.ts";

Deno.test({
  ...ignoredFor(
    Deno.build.os === "linux" ? undefined : "not Linux (reads /proc)",
    "a public port already in use: the start fails and nothing stays listening",
  ),
}, async () => {
  const inner = /\/sd15-mcp-http-[^/]+\/http\.sock$/;
  const before = ownUnixSockets(inner).length;
  const taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  try {
    await assert.rejects(
      startHttpServer({
        hostname: "127.0.0.1",
        port: (taken.addr as Deno.NetAddr).port,
        allowedOrigins: [],
        authenticator: { authenticate: () => Promise.reject(new Error("not called")) },
        createServer: () => {
          throw new Error("not called");
        },
        authFailureResponse: () => new Response(null, { status: 401 }),
      }),
      Deno.errors.AddrInUse,
    );
    assert.equal(ownUnixSockets(inner).length, before, "the inner server still listens");
  } finally {
    taken.close();
  }
});

Deno.test({
  ...ignoredFor(
    Deno.build.os === "linux" ? undefined : "not Linux (reads /proc)",
    "the inner socket is in a 0700 directory of its own, removed when the server has shut down",
  ),
}, async () => {
  const server = await startHttpServer({
    hostname: "127.0.0.1",
    port: 0,
    allowedOrigins: [],
    authenticator: { authenticate: () => Promise.reject(new Error("not called")) },
    createServer: () => {
      throw new Error("not called");
    },
    authFailureResponse: () => new Response(null, { status: 401 }),
  });
  const sockets = ownUnixSockets(/\/sd15-mcp-http-[^/]+\/http\.sock$/);
  assert.equal(sockets.length, 1, sockets.join(", "));
  const dir = sockets[0].slice(0, sockets[0].lastIndexOf("/"));
  assert.equal(Deno.statSync(dir).mode! & 0o777, 0o700);
  const health = await fetch(`http://127.0.0.1:${server.addr.port}/healthz`);
  assert.equal(health.status, 200);
  await health.body?.cancel();
  await server.shutdown(1_000);
  assert.throws(() => Deno.statSync(dir), Deno.errors.NotFound, "the directory is left behind");
});

Deno.test("/healthz: 200 ok while the database answers, 503 with the reason while it does not", async () => {
  const ok = healthResponse(withDatabase("ok", { role: "all" }));
  assert.equal(ok.status, 200);
  assert.deepEqual(await ok.json(), { status: "ok", role: "all", database: "ok" });
  const down = healthResponse(withDatabase("unavailable", { role: "all" }));
  assert.equal(down.status, 503);
  assert.equal(down.headers.get("retry-after"), "5");
  const body = await down.json();
  assert.equal(body.status, "unavailable");
  assert.equal(body.database, "unavailable");
  assert.match(body.reason, /^the database is unavailable/);
});
