import assert from "node:assert/strict";
import { CORS_ALLOW_HEADERS, CorsPolicy, loopbackOrigins } from "./cors.ts";

Deno.test("cors: configured origins and the server's own loopback origins, nothing else", () => {
  const cors = new CorsPolicy(["https://app.example"], 8123);
  assert.equal(cors.allows("https://app.example"), true);
  for (const own of loopbackOrigins(8123)) assert.equal(cors.allows(own), true, own);
  assert.equal(cors.allows("http://127.0.0.1:8124"), false, "another port is another origin");
  assert.equal(cors.allows("http://localhost"), false);
  assert.equal(cors.allows("https://127.0.0.1:8123"), false, "https is another origin");
  assert.equal(cors.allows("http://evil.example:8123"), false);
  assert.equal(cors.allows("null"), false);
  const unbound = new CorsPolicy([]);
  assert.equal(unbound.allows("http://127.0.0.1:0"), false);
});

Deno.test("cors: a preflight names the streamable HTTP headers", () => {
  const response = new CorsPolicy([], 9000).preflight("http://localhost:9000");
  assert.equal(response.status, 204);
  const h = response.headers;
  assert.equal(h.get("access-control-allow-origin"), "http://localhost:9000");
  assert.match(h.get("access-control-allow-methods")!, /\bPOST\b/);
  const allowed = h.get("access-control-allow-headers")!.toLowerCase().split(/,\s*/);
  for (
    const name of [
      "mcp-protocol-version",
      "mcp-api-key",
      "authorization",
      "last-event-id",
      "content-type",
      "x-mcp-token",
    ]
  ) assert.ok(allowed.includes(name), name);
  assert.equal(allowed.length, CORS_ALLOW_HEADERS.length);
  assert.equal(h.get("vary"), "Origin");
  assert.equal(h.get("access-control-allow-credentials"), null, "keys travel in headers");
});

Deno.test("cors: a preflight without Origin is a plain 204 with no CORS headers", () => {
  const response = new CorsPolicy([], 9000).preflight(null);
  assert.equal(response.status, 204);
  assert.match(response.headers.get("allow")!, /POST/);
  assert.equal(response.headers.get("access-control-allow-origin"), null);
});

Deno.test("cors: actual responses expose Mcp-Session-Id, also when headers are immutable", async () => {
  const cors = new CorsPolicy([], 9000);
  const plain = cors.decorate(new Response("x", { status: 401 }), "http://127.0.0.1:9000");
  assert.equal(plain.headers.get("access-control-allow-origin"), "http://127.0.0.1:9000");
  assert.match(plain.headers.get("access-control-expose-headers")!, /Mcp-Session-Id/);
  assert.equal(plain.status, 401);
  const frozen = Response.redirect("http://127.0.0.1:9000/x", 302); // immutable headers
  const copied = cors.decorate(frozen, "http://127.0.0.1:9000");
  assert.equal(copied.status, 302);
  assert.equal(copied.headers.get("access-control-allow-origin"), "http://127.0.0.1:9000");
  assert.equal(copied.headers.get("location"), "http://127.0.0.1:9000/x");
  const untouched = cors.decorate(new Response("y"), null);
  assert.equal(untouched.headers.get("access-control-allow-origin"), null);
  assert.equal(await untouched.text(), "y");
});
