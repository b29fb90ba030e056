/**
 * The API-key matrix (X-MCP-Token, key headers and formats, key states,
 * permissions and project scope) end to end: the app started in-process over real
 * streamable HTTP (tiny models), API keys in the test database (a real
 * PostgreSQL server with DATABASE_URL, else embedded PostgreSQL), the SDK client
 * and raw fetch for status codes and headers, a fake backend for the
 * project-scope checks, and the `keys` CLI as a subprocess.
 */

import assert from "node:assert/strict";
import {
  createTestKey as createKey,
  registerPrintedKey,
  registerSecret,
  teeChildLog,
} from "./helpers/log_secrets.ts";
import { deleteKey, revokeKey } from "../mod/auth/key_store.ts";
import { API_KEY_CHALLENGE } from "../mod/auth/mod.ts";
import { startApp } from "../mod/app/mod.ts";
import { loadConfig } from "../mod/config/mod.ts";
import { connectHttp } from "./helpers/http_client.ts";
import { Client, StreamableHTTPClientTransport } from "../mod/mcp/client_sdk.ts";
import { openTestDatabase, type TestDatabase } from "./helpers/postgres.ts";
import { texts } from "./helpers/results.ts";
import { writeTinyConfig } from "./helpers/tiny_config.ts";
import { runKeysCli } from "./helpers/keys_cli.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A fake backend internal API that records what reaches it. */
function startFakeBackend() {
  const seen: Array<{ path: string; projectHeader: string | null }> = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (request) => {
    const url = new URL(request.url);
    seen.push({
      path: url.pathname + url.search,
      projectHeader: request.headers.get("x-mcp-project-id"),
    });
    return Response.json({
      ok: true,
      data: { project_id: Number(url.searchParams.get("project_id")), total_count: 0, items: [] },
    });
  });
  return { url: `http://127.0.0.1:${server.addr.port}`, seen, close: () => server.shutdown() };
}

async function startServer(tdb: TestDatabase, environment: string, env: Record<string, string>) {
  const temp = await writeTinyConfig("", { environment });
  const config = await loadConfig({
    path: temp.path,
    overrides: { transport: "http" },
    env: { DATABASE_URL: tdb.url, ...env },
  });
  const app = await startApp(config);
  return {
    port: app.http!.port,
    async close() {
      await app.shutdown();
      await temp.remove();
    },
  };
}

/** A raw tools/list POST; returns status, headers and parsed body. */
async function rawList(port: number, headers: Record<string, string>) {
  const response = await fetch(`http://127.0.0.1:${port}/mcp`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      ...headers,
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
  });
  const text = await response.text();
  let body: { error?: { code: number; message: string } } | undefined;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined; // an SSE stream (success)
  }
  return { status: response.status, headers: response.headers, body, text };
}

/**
 * An OAuth client provider as a CLI host has one (nothing stored yet, no
 * browser): the SDK transport answers a 401 with discovery and registration.
 */
function noBrowserOAuth() {
  const redirect = "http://127.0.0.1:9/callback";
  return {
    get redirectUrl() {
      return redirect;
    },
    get clientMetadata() {
      return { redirect_uris: [redirect], client_name: "auth_http_test" };
    },
    clientInformation: () => undefined,
    saveClientInformation: () => {},
    tokens: () => undefined,
    saveTokens: () => {},
    redirectToAuthorization: () => {
      throw new Error("no browser in a test");
    },
    saveCodeVerifier: () => {},
    codeVerifier: () => "",
  };
}

async function keysCli(args: string[], databaseUrl: string) {
  const output = await runKeysCli(args, { env: { DATABASE_URL: databaseUrl } });
  const key = registerPrintedKey(output.stdout);
  teeChildLog(`keys ${args[0]}`, output.stderr);
  assert.equal(output.code, 0, output.stderr);
  return key;
}

Deno.test({
  name: "http auth: the API-key matrix over real streamable HTTP",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const tdb = await openTestDatabase("auth_http");
    const backend = startFakeBackend();
    const secret = `cf-${crypto.randomUUID()}`;
    registerSecret(secret);
    const write = await createKey(tdb.db, { projectId: 42, userId: 7, permission: "write" });
    const read = await createKey(tdb.db, { projectId: 42, userId: 7, permission: "read" });
    const server = await startServer(tdb, "production", {
      CLOUDFRONT_SECRET_HEADER: secret,
      BACKEND_INTERNAL_URL: backend.url,
    });
    const token = { "X-MCP-Token": secret };
    try {
      await t.step(
        "production: the SDK client with the token and either key header lists the tools",
        async () => {
          for (
            const headers of [
              { "MCP-API-Key": write.key },
              { Authorization: `Bearer ${write.key}` },
            ] as Record<string, string>[]
          ) {
            const client = await connectHttp(server.port, { ...token, ...headers });
            try {
              const names = (await client.listTools()).tools.map((tool) => tool.name);
              assert.ok(
                names.includes("generate_image") && names.includes("list-designs"),
                names.join(","),
              );
            } finally {
              await client.close();
            }
          }
        },
      );

      await t.step(
        "production: a missing or wrong X-MCP-Token is 401 with a JSON-RPC error",
        async () => {
          for (const headers of [{}, { "X-MCP-Token": secret + "x" }] as Record<string, string>[]) {
            const r = await rawList(server.port, { ...headers, "MCP-API-Key": write.key });
            assert.equal(r.status, 401);
            assert.equal(r.headers.get("www-authenticate"), API_KEY_CHALLENGE);
            assert.equal(r.body?.error?.code, -32001);
            assert.match(r.body?.error?.message ?? "", /X-MCP-Token/);
          }
          await assert.rejects(connectHttp(server.port, { "MCP-API-Key": write.key }));
        },
      );

      // The challenge names the API-key scheme (it was `Bearer …, error="invalid_token"`,
      // which OAuth-capable clients answered with discovery and client registration).
      await t.step(
        "malformed, unknown, revoked, expired and deleted keys are 401 with an API-key challenge",
        async () => {
          const revoked = await createKey(tdb.db, {
            projectId: 42,
            userId: 7,
            permission: "write",
          });
          await revokeKey(tdb.db, revoked.prefix);
          const expired = await createKey(tdb.db, {
            projectId: 42,
            userId: 7,
            permission: "write",
          });
          await tdb.db.query("UPDATE mcp_api_keys SET expires_at = now() WHERE key_prefix = $1", [
            expired.prefix,
          ]);
          const deleted = await createKey(tdb.db, {
            projectId: 42,
            userId: 7,
            permission: "write",
          });
          await deleteKey(tdb.db, deleted.prefix);
          const cases: Array<[string, string, RegExp]> = [
            ["malformed", "guinness_only-one-part", /malformed API key/],
            [
              "unknown",
              "guinness_Unknown12345_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ",
              /^invalid API key$/,
            ],
            ["revoked", revoked.key, /^API key revoked$/],
            ["expired", expired.key, /^API key expired$/],
            ["deleted", deleted.key, /^invalid API key$/],
          ];
          for (const [what, key, message] of cases) {
            const r = await rawList(server.port, { ...token, "MCP-API-Key": key });
            assert.equal(r.status, 401, what);
            assert.equal(
              r.headers.get("www-authenticate"),
              `${API_KEY_CHALLENGE}, error="invalid_key"`,
              what,
            );
            assert.match(r.body?.error?.message ?? "", message, what);
            assert.ok(
              !r.text.includes(key.slice(key.lastIndexOf("_") + 1)),
              `${what}: the secret is echoed`,
            );
          }
          await assert.rejects(connectHttp(server.port, { ...token, "MCP-API-Key": revoked.key }));
          const none = await rawList(server.port, token);
          assert.equal(none.status, 401);
          assert.equal(none.headers.get("www-authenticate"), API_KEY_CHALLENGE);
        },
      );

      await t.step(
        "GET /mcp checks the token and the key before its 405, and says why it refused",
        async () => {
          const revoked = await createKey(tdb.db, {
            projectId: 42,
            userId: 7,
            permission: "write",
          });
          await revokeKey(tdb.db, revoked.prefix);
          const get = async (headers: Record<string, string>) => {
            const r = await fetch(`http://127.0.0.1:${server.port}/mcp`, {
              headers: { accept: "text/event-stream", ...headers },
            });
            const text = await r.text();
            return { status: r.status, headers: r.headers, text };
          };
          const cases: Array<[string, Record<string, string>, RegExp, string]> = [
            ["no token", { "MCP-API-Key": write.key }, /X-MCP-Token/, API_KEY_CHALLENGE],
            [
              "wrong key",
              { ...token, "MCP-API-Key": `${write.key.slice(0, -4)}zzzz` },
              /^invalid API key$/,
              `${API_KEY_CHALLENGE}, error="invalid_key"`,
            ],
            [
              "revoked key",
              { ...token, "MCP-API-Key": revoked.key },
              /^API key revoked$/,
              `${API_KEY_CHALLENGE}, error="invalid_key"`,
            ],
          ];
          for (const [what, headers, message, challenge] of cases) {
            const r = await get(headers);
            assert.equal(r.status, 401, what);
            assert.equal(r.headers.get("www-authenticate"), challenge, what);
            assert.match(JSON.parse(r.text).error.message, message, what);
          }
          const ok = await get({ ...token, "MCP-API-Key": write.key });
          assert.equal(ok.status, 405);
          assert.equal(ok.headers.get("allow"), "POST");
        },
      );

      await t.step(
        "OAuth probes (discovery, registration) get 404 saying why the credentials were refused",
        async () => {
          const probe = async (method: string, path: string, headers: Record<string, string>) => {
            const r = await fetch(`http://127.0.0.1:${server.port}${path}`, {
              method,
              headers,
              ...(method === "POST" ? { body: "{}" } : {}),
            });
            return { status: r.status, text: await r.text() };
          };
          const wrong = `${write.key.slice(0, -4)}zzzz`;
          for (
            const [headers, reason] of [
              [{ ...token, "MCP-API-Key": wrong }, "invalid API key"],
              [{ "MCP-API-Key": write.key }, "missing X-MCP-Token"],
              [{ ...token, "MCP-API-Key": write.key }, "this API key is accepted"],
            ] as Array<[Record<string, string>, string]>
          ) {
            for (
              const [method, path] of [
                ["POST", "/register"],
                ["GET", "/.well-known/oauth-protected-resource/mcp"],
                ["GET", "/.well-known/oauth-authorization-server"],
              ]
            ) {
              const r = await probe(method, path, headers);
              assert.equal(r.status, 404, path);
              assert.match(r.text, /this server offers no OAuth/, path);
              assert.ok(r.text.toLowerCase().includes(reason.toLowerCase()), `${path}: ${r.text}`);
            }
          }
          const other = await probe("GET", "/elsewhere", { ...token, "MCP-API-Key": wrong });
          assert.equal(other.status, 404);
          assert.equal(other.text, "not found\n");
        },
      );

      // What Claude Code and mcp-remote do, with the SDK they build on: an OAuth provider,
      // so a 401 starts discovery and client registration; the person reads the error.
      await t.step(
        "an OAuth-capable SDK client's error carries the server's reason for a refused key",
        async () => {
          const revoked = await createKey(tdb.db, {
            projectId: 42,
            userId: 7,
            permission: "write",
          });
          await revokeKey(tdb.db, revoked.prefix);
          const cases: Array<[Record<string, string>, RegExp]> = [
            [{ ...token, "MCP-API-Key": `${read.key.slice(0, -4)}zzzz` }, /invalid API key/],
            [{ ...token, "MCP-API-Key": revoked.key }, /API key revoked/],
            [{ "MCP-API-Key": write.key }, /missing X-MCP-Token header/],
          ];
          for (const [headers, reason] of cases) {
            const client = new Client({ name: "oauth-capable", version: "0.0.0" });
            const transport = new StreamableHTTPClientTransport(
              new URL(`http://127.0.0.1:${server.port}/mcp`),
              { authProvider: noBrowserOAuth(), requestInit: { headers } },
            );
            const error = await client.connect(transport).then(
              () => assert.fail("connected with refused credentials"),
              (e: Error) => e,
            );
            assert.match(error.message, reason);
            assert.match(error.message, /this server offers no OAuth/);
            await client.close().catch(() => {});
          }
        },
      );

      await t.step("read vs write: a read key lists and reads, but may not generate", async () => {
        const client = await connectHttp(server.port, { ...token, "MCP-API-Key": read.key });
        try {
          assert.ok((await client.listTools()).tools.length > 0);
          const refused = await client.callTool({
            name: "generate_image",
            arguments: { positive_prompt: "a lighthouse", size: "square_512" },
          });
          assert.equal(refused.isError, true);
          assert.match(texts(refused), /read permission/);
          const before = backend.seen.length;
          const listed = await client.callTool({
            name: "list-designs",
            arguments: { project_id: 42 },
          });
          assert.notEqual(listed.isError, true, texts(listed));
          assert.equal(backend.seen.length, before + 1);
          assert.equal(backend.seen.at(-1)!.projectHeader, "42");
        } finally {
          await client.close();
        }
      });

      await t.step("project mismatch is a tool error and the backend is not called", async () => {
        const client = await connectHttp(server.port, { ...token, "MCP-API-Key": write.key });
        try {
          const before = backend.seen.length;
          const refused = await client.callTool({
            name: "list-designs",
            arguments: { project_id: 43 },
          });
          assert.equal(refused.isError, true);
          assert.match(texts(refused), /project_id 43 is outside this API key's scope/);
          assert.equal(backend.seen.length, before, "no backend call");
        } finally {
          await client.close();
        }
      });

      await t.step(
        "a key made with `keys create` works, and fails on the request after `keys revoke`",
        async () => {
          const key = await keysCli([
            "create",
            "--project",
            "42",
            "--user",
            "7",
            "--permission",
            "write",
          ], tdb.url);
          const prefix = /^guinness_(.+)_[a-zA-Z0-9]+$/.exec(key)![1];
          const client = await connectHttp(server.port, { ...token, "MCP-API-Key": key });
          try {
            assert.ok((await client.listTools()).tools.length > 0);
            assert.ok(
              (await client.listTools()).tools.length > 0,
              "served from the verification cache",
            );
            await keysCli(["revoke", prefix], tdb.url);
            await assert.rejects(client.listTools());
            const r = await rawList(server.port, { ...token, "MCP-API-Key": key });
            assert.equal(r.status, 401);
            assert.equal(r.body?.error?.message, "API key revoked");
          } finally {
            await client.close().catch(() => {});
          }
        },
      );

      await t.step("database stopped mid-run: 503 with Retry-After, then recovery", async () => {
        assert.equal(
          (await rawList(server.port, { ...token, "MCP-API-Key": write.key })).status,
          200,
        );
        await tdb.proxy.down();
        try {
          const r = await rawList(server.port, { ...token, "MCP-API-Key": write.key });
          assert.equal(r.status, 503);
          assert.equal(r.headers.get("retry-after"), "5");
          assert.equal(r.headers.get("www-authenticate"), null);
          assert.match(r.body?.error?.message ?? "", /authentication database unavailable/);
          assert.ok(!r.text.includes(tdb.password));
        } finally {
          await tdb.proxy.up();
        }
        let status = 0;
        for (let i = 0; i < 100 && status !== 200; i++) {
          status = (await rawList(server.port, { ...token, "MCP-API-Key": write.key })).status;
          if (status !== 200) await sleep(100);
        }
        assert.equal(status, 200);
      });

      await t.step("local: no X-MCP-Token needed, but still an API key", async () => {
        const local = await startServer(tdb, "local", {});
        try {
          const client = await connectHttp(local.port, { "MCP-API-Key": write.key });
          try {
            assert.ok((await client.listTools()).tools.length > 0);
          } finally {
            await client.close();
          }
          const r = await rawList(local.port, {});
          assert.equal(r.status, 401);
          assert.match(r.body?.error?.message ?? "", /missing API key/);
        } finally {
          await local.close();
        }
      });
    } finally {
      await server.close();
      await backend.close();
      await tdb.close();
    }
  },
});
