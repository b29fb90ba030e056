import { deepStrictEqual, ok, strictEqual, throws } from "node:assert";
import { createBackendClient } from "./backend_client.ts";
import { closedPortUrl, startFakeBackend } from "./testing.ts";

const DESIGN_ID = "42_hDDA9BNori9OTXSClduXqR_40002029:37033";

Deno.test("createBackendClient() sends the contract headers, encoded path and defined query values", async () => {
  const backend = await startFakeBackend(() => ({ json: { items: [] } }));
  try {
    const client = createBackendClient({ baseUrl: backend.url, apiKey: "k-123", timeoutMs: 5000 });
    const outcome = await client.send({
      method: "GET",
      path: ["internal", "des2code", DESIGN_ID],
      query: { project_id: 42, organization_id: undefined, limit: 20, offset: null },
    }, { projectId: 42 });
    deepStrictEqual(outcome, { ok: true, status: 200, data: { items: [] } });
    strictEqual(backend.requests.length, 1);
    const [request] = backend.requests;
    strictEqual(request.method, "GET");
    // encodeURIComponent(":") is "%3A" (RFC 3986 reserved character).
    strictEqual(request.path, "/internal/des2code/42_hDDA9BNori9OTXSClduXqR_40002029%3A37033");
    strictEqual(request.query, "project_id=42&limit=20");
    strictEqual(request.headers["accept"], "application/json");
    strictEqual(request.headers["content-type"], "application/json");
    strictEqual(request.headers["x-api-key"], "k-123");
    strictEqual(request.headers["x-mcp-project-id"], "42");
    strictEqual(request.body, "");
  } finally {
    await backend.close();
  }
});

Deno.test("createBackendClient() omits X-API-Key without a key and X-MCP-Project-ID without a project", async () => {
  const backend = await startFakeBackend(() => ({ json: { ok: true } }));
  try {
    for (const apiKey of [undefined, ""]) {
      const client = createBackendClient({ baseUrl: backend.url, apiKey, timeoutMs: 5000 });
      await client.send({ method: "GET", path: ["internal", "designs"] }, { projectId: null });
      await client.send({ method: "GET", path: ["internal", "designs"] });
    }
    strictEqual(backend.requests.length, 4);
    for (const request of backend.requests) {
      strictEqual("x-api-key" in request.headers, false);
      strictEqual("x-mcp-project-id" in request.headers, false);
      strictEqual(request.query, "");
      strictEqual(request.headers["accept"], "application/json");
    }
  } finally {
    await backend.close();
  }
});

Deno.test("createBackendClient() POSTs the JSON body and keeps a base URL path prefix", async () => {
  const backend = await startFakeBackend(() => ({ status: 202, json: { queued: true } }));
  try {
    const client = createBackendClient({ baseUrl: `${backend.url}/api/`, timeoutMs: 5000 });
    const body = { design_id: DESIGN_ID, project_id: 42, organization_id: 1 };
    const outcome = await client.send({ method: "POST", path: ["internal", "des2code"], body });
    deepStrictEqual(outcome, { ok: true, status: 202, data: { queued: true } });
    const [request] = backend.requests;
    strictEqual(request.method, "POST");
    strictEqual(request.path, "/api/internal/des2code");
    deepStrictEqual(JSON.parse(request.body), body);
  } finally {
    await backend.close();
  }
});

Deno.test("createBackendClient() unwraps an ok envelope and reports an error envelope", async () => {
  const backend = await startFakeBackend((request) =>
    request.path.endsWith("/good")
      ? { json: { ok: true, data: { name: "Landing Page" }, error: null } }
      : {
        status: 404,
        json: { ok: false, data: null, error: { code: "NOT_FOUND", message: "Design not found" } },
      }
  );
  try {
    const client = createBackendClient({ baseUrl: backend.url, timeoutMs: 5000 });
    deepStrictEqual(await client.send({ method: "GET", path: ["good"] }), {
      ok: true,
      status: 200,
      data: { name: "Landing Page" },
    });
    deepStrictEqual(await client.send({ method: "GET", path: ["bad"] }), {
      ok: false,
      kind: "rejected",
      status: 404,
      code: "NOT_FOUND",
      message: "Design not found",
    });
  } finally {
    await backend.close();
  }
});

Deno.test("createBackendClient() reports a body that is not JSON as an invalid response", async () => {
  const backend = await startFakeBackend(() => ({ text: "{not json" }));
  try {
    const client = createBackendClient({ baseUrl: backend.url, timeoutMs: 5000 });
    const outcome = await client.send({ method: "GET", path: ["internal", "designs"] });
    strictEqual(outcome.ok, false);
    if (outcome.ok) return;
    strictEqual(outcome.kind, "invalid_response");
    ok(outcome.message.includes("not valid JSON (HTTP 200)"), outcome.message);
    ok(outcome.message.includes('"{not json"'), outcome.message);
  } finally {
    await backend.close();
  }
});

Deno.test("createBackendClient() times out a backend that never answers", async () => {
  const backend = await startFakeBackend(() => ({ hang: true }));
  try {
    const client = createBackendClient({ baseUrl: backend.url, timeoutMs: 150 });
    const started = performance.now();
    const outcome = await client.send({ method: "GET", path: ["internal", "designs"] });
    const elapsed = performance.now() - started;
    deepStrictEqual(outcome, {
      ok: false,
      kind: "unavailable",
      reason: "timeout",
      message: "the backend internal API did not answer within 150 ms",
    });
    strictEqual(backend.requests.length, 1);
    // The backend never answers: an outcome at all is the deadline firing, no earlier than set.
    ok(elapsed >= 140, `elapsed ${elapsed} ms`);
  } finally {
    await backend.close();
  }
});

Deno.test("createBackendClient() reports a closed port as unreachable", async () => {
  const client = createBackendClient({ baseUrl: closedPortUrl(), timeoutMs: 5000 });
  const outcome = await client.send({ method: "GET", path: ["internal", "designs"] });
  deepStrictEqual(outcome, {
    ok: false,
    kind: "unavailable",
    reason: "unreachable",
    message: "the backend internal API could not be reached",
  });
});

Deno.test("createBackendClient() stops when the caller's signal aborts", async () => {
  const controller = new AbortController();
  const backend = await startFakeBackend(() => {
    controller.abort();
    return { hang: true };
  });
  try {
    const client = createBackendClient({ baseUrl: backend.url, timeoutMs: 5000 });
    const outcome = await client.send({ method: "GET", path: ["x"] }, {
      signal: controller.signal,
    });
    strictEqual(outcome.ok, false);
    if (!outcome.ok) strictEqual(outcome.kind, "cancelled");
  } finally {
    await backend.close();
  }
});

Deno.test("createBackendClient() does not follow redirects", async () => {
  const backend = await startFakeBackend((request) =>
    request.path === "/internal/designs"
      ? { status: 302, headers: { location: "/elsewhere" } }
      : { json: { leaked: true } }
  );
  try {
    const client = createBackendClient({ baseUrl: backend.url, apiKey: "k", timeoutMs: 5000 });
    const outcome = await client.send({ method: "GET", path: ["internal", "designs"] });
    strictEqual(outcome.ok, false);
    if (!outcome.ok) strictEqual(outcome.kind, "invalid_response");
    deepStrictEqual(backend.requests.map((request) => request.path), ["/internal/designs"]);
  } finally {
    await backend.close();
  }
});

Deno.test("createBackendClient() rejects a base URL that is not http(s) and a bad timeout", () => {
  throws(() => createBackendClient({ baseUrl: "not a url", timeoutMs: 1000 }), TypeError);
  throws(
    () => createBackendClient({ baseUrl: "ftp://backend", timeoutMs: 1000 }),
    /must be http or https, got "ftp:"/,
  );
  throws(() => createBackendClient({ baseUrl: "http://b", timeoutMs: 0 }), RangeError);
  throws(() => createBackendClient({ baseUrl: "http://b", timeoutMs: 1.5 }), RangeError);
});
