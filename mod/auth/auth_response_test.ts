import { deepStrictEqual, strictEqual } from "node:assert";
import {
  API_KEY_CHALLENGE,
  authFailureResponse,
  isOAuthProbe,
  noOAuthResponse,
} from "./auth_response.ts";

// The challenge was `Bearer realm="mcp", error="invalid_token"` until OAuth-capable
// clients (Claude Code, Gemini CLI, OpenCode, mcp-remote) were seen answering it with
// OAuth discovery and client registration instead of showing the body's reason: it
// now names the API-key scheme, and no 401 carries a Bearer challenge.
Deno.test("401 carries a JSON-RPC error body and an API-key challenge, not Bearer", async () => {
  const response = authFailureResponse({
    ok: false,
    status: 401,
    message: "invalid API key",
    invalidToken: true,
  });
  strictEqual(response.status, 401);
  strictEqual(response.headers.get("content-type"), "application/json");
  strictEqual(
    response.headers.get("www-authenticate"),
    'ApiKey realm="mcp", header="MCP-API-Key", error="invalid_key"',
  );
  strictEqual(/\bBearer\b/i.test(response.headers.get("www-authenticate")!), false);
  strictEqual(response.headers.get("cache-control"), "no-store");
  deepStrictEqual(await response.json(), {
    jsonrpc: "2.0",
    error: { code: -32001, message: "invalid API key" },
    id: null,
  });
});

Deno.test("401 without a presented key gets the bare challenge (as RFC 6750 §3.1)", async () => {
  const response = authFailureResponse({ ok: false, status: 401, message: "missing API key" }, 5);
  strictEqual(response.headers.get("www-authenticate"), API_KEY_CHALLENGE);
  strictEqual(API_KEY_CHALLENGE, 'ApiKey realm="mcp", header="MCP-API-Key"');
  strictEqual((await response.json()).id, 5);
});

Deno.test("503 has Retry-After and no challenge", async () => {
  const response = authFailureResponse(
    { ok: false, status: 503, message: "database unavailable" },
    "r1",
  );
  strictEqual(response.status, 503);
  strictEqual(response.headers.get("www-authenticate"), null);
  strictEqual(response.headers.get("retry-after"), "5");
  deepStrictEqual(await response.json(), {
    jsonrpc: "2.0",
    error: { code: -32001, message: "database unavailable" },
    id: "r1",
  });
});

Deno.test("a 503 may ask for a shorter Retry-After (a full verification queue)", () => {
  const response = authFailureResponse({
    ok: false,
    status: 503,
    message: "too many API key verifications in progress; retry in a second",
    retryAfterSeconds: 1,
  });
  strictEqual(response.status, 503);
  strictEqual(response.headers.get("retry-after"), "1");
});

Deno.test("the OAuth probe paths are recognised, and only those", () => {
  for (
    const path of [
      "/register",
      "/authorize",
      "/token",
      "/.well-known/oauth-protected-resource",
      "/.well-known/oauth-protected-resource/mcp",
      "/.well-known/oauth-authorization-server",
      "/.well-known/oauth-authorization-server/mcp",
      "/.well-known/openid-configuration",
      "/mcp/.well-known/openid-configuration",
      "/mcp/.well-known/oauth-protected-resource",
    ]
  ) strictEqual(isOAuthProbe(path), true, path);
  for (const path of ["/mcp", "/healthz", "/", "/registers", "/.well-known/security.txt"]) {
    strictEqual(isOAuthProbe(path), false, path);
  }
});

Deno.test("an OAuth probe gets 404 whose body gives the credentials' fate in one line", async () => {
  const refused = noOAuthResponse({
    ok: false,
    status: 401,
    message: "API key revoked",
    invalidToken: true,
  });
  strictEqual(refused.status, 404);
  strictEqual(refused.headers.get("www-authenticate"), null);
  const text = await refused.text();
  strictEqual(text.split("\n").length, 2, "one line and its newline");
  strictEqual(text.startsWith("API key revoked (this server offers no OAuth"), true, text);
  const accepted = await noOAuthResponse(null).text();
  strictEqual(accepted.startsWith("this API key is accepted (this server offers no OAuth"), true);
});
