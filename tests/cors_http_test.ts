/**
 * Browsers over real HTTP: the CORS preflight and the headers on actual
 * responses, against the app started in-process with the tiny models and a
 * real (embedded or `DATABASE_URL`) PostgreSQL holding the API key. `fetch`
 * plays the browser: it sends the Origin and preflight headers a browser
 * would.
 */

import assert from "node:assert/strict";
import { createKey } from "../mod/auth/create_key.ts";
import { openTestDatabase } from "./helpers/postgres.ts";
import { writeTinyConfig } from "./helpers/tiny_config.ts";
import { initializeRequest } from "./helpers/json_rpc.ts";
import { startAppFromConfig } from "./helpers/app_from_config.ts";

const LIST = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} });
const INIT = JSON.stringify(initializeRequest(0, "browser"));

Deno.test("http CORS: preflight and actual responses for allowed Origins, 403 for others", async (t) => {
  const tdb = await openTestDatabase("cors_e2e");
  const key = (await createKey(tdb.db, { projectId: 1, userId: 1, permission: "write" })).key;
  const temp = await writeTinyConfig("", {});
  await Deno.writeTextFile(
    temp.path,
    (await Deno.readTextFile(temp.path)).replace(
      "[server]\n",
      `[server]\nallowed_origins = ["https://app.example"]\n`,
    ),
  );
  const app = await startAppFromConfig(temp.path, tdb.url);
  const port = app.http!.port;
  const url = `http://127.0.0.1:${port}/mcp`;
  const preflight = (origin: string) =>
    fetch(url, {
      method: "OPTIONS",
      headers: {
        origin,
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type,mcp-api-key,mcp-protocol-version",
      },
    });
  const post = (origin: string, body: string, headers: Record<string, string> = {}) =>
    fetch(url, {
      method: "POST",
      headers: {
        origin,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-protocol-version": "2025-06-18",
        ...headers,
      },
      body,
    });
  try {
    for (
      const origin of [
        `http://127.0.0.1:${port}`,
        `http://localhost:${port}`,
        "https://app.example",
      ]
    ) {
      await t.step(`preflight from ${origin} succeeds without a key`, async () => {
        const response = await preflight(origin);
        await response.body?.cancel();
        assert.equal(response.status, 204);
        assert.equal(response.headers.get("access-control-allow-origin"), origin);
        const allowed = response.headers.get("access-control-allow-headers")!.toLowerCase();
        for (const h of ["mcp-api-key", "mcp-protocol-version", "authorization", "last-event-id"]) {
          assert.match(allowed, new RegExp(`\\b${h}\\b`));
        }
        assert.match(response.headers.get("access-control-allow-methods")!, /POST/);
      });
    }
    await t.step("preflight from another Origin (or another port) is 403", async () => {
      for (const origin of ["http://evil.example", `http://127.0.0.1:${port + 1}`]) {
        const response = await preflight(origin);
        assert.equal(response.status, 403, origin);
        assert.equal(response.headers.get("access-control-allow-origin"), null);
        assert.match((await response.json()).error.message, /is not allowed/);
      }
    });
    await t.step("an allowed Origin's POST gets the tools with CORS headers", async () => {
      const origin = `http://localhost:${port}`;
      const init = await post(origin, INIT, { "mcp-api-key": key });
      await init.body?.cancel();
      assert.equal(init.status, 200);
      const response = await post(origin, LIST, { "mcp-api-key": key });
      assert.equal(response.status, 200);
      assert.equal(response.headers.get("access-control-allow-origin"), origin);
      assert.match(response.headers.get("access-control-expose-headers")!, /Mcp-Session-Id/);
      assert.match(response.headers.get("vary")!, /Origin/);
      const text = await response.text();
      assert.match(text, /"generate_image"/);
    });
    await t.step("an allowed Origin can read a 401 (no key)", async () => {
      const response = await post("https://app.example", LIST);
      await response.body?.cancel();
      assert.equal(response.status, 401);
      assert.equal(response.headers.get("access-control-allow-origin"), "https://app.example");
    });
    await t.step("requests without Origin get no CORS headers", async () => {
      const response = await fetch(url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          "mcp-api-key": key,
        },
        body: INIT,
      });
      await response.body?.cancel();
      assert.equal(response.status, 200);
      assert.equal(response.headers.get("access-control-allow-origin"), null);
    });
  } finally {
    await app.shutdown();
    await tdb.close();
    await temp.remove();
  }
});
