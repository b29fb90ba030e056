import { deepStrictEqual, strictEqual } from "node:assert";
import { authFailureResponse } from "./auth_response.ts";

Deno.test("401 carries a JSON-RPC error body and a Bearer challenge", async () => {
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
    'Bearer realm="mcp", error="invalid_token"',
  );
  strictEqual(response.headers.get("cache-control"), "no-store");
  deepStrictEqual(await response.json(), {
    jsonrpc: "2.0",
    error: { code: -32001, message: "invalid API key" },
    id: null,
  });
});

Deno.test("401 without a presented credential gets the bare challenge (RFC 6750 §3.1)", async () => {
  const response = authFailureResponse({ ok: false, status: 401, message: "missing API key" }, 5);
  strictEqual(response.headers.get("www-authenticate"), 'Bearer realm="mcp"');
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
