import { deepStrictEqual, ok, strictEqual } from "node:assert";
import { interpretBackendResponse } from "./interpret_response.ts";

Deno.test("interpretBackendResponse() returns raw JSON payloads as they are", () => {
  deepStrictEqual(interpretBackendResponse(200, '{"design_id":"42_a_1"}'), {
    ok: true,
    status: 200,
    data: { design_id: "42_a_1" },
  });
  deepStrictEqual(interpretBackendResponse(200, "[1,2]"), { ok: true, status: 200, data: [1, 2] });
  // An object with an "ok" field but neither "data" nor "error" is not an envelope.
  deepStrictEqual(interpretBackendResponse(200, '{"ok":true,"count":3}'), {
    ok: true,
    status: 200,
    data: { ok: true, count: 3 },
  });
});

Deno.test("interpretBackendResponse() unwraps { ok: true, data }", () => {
  deepStrictEqual(
    interpretBackendResponse(200, '{"ok":true,"data":{"items":[]},"error":null}'),
    { ok: true, status: 200, data: { items: [] } },
  );
  deepStrictEqual(interpretBackendResponse(201, '{"ok":true,"data":null}'), {
    ok: true,
    status: 201,
    data: null,
  });
});

Deno.test("interpretBackendResponse() treats an empty 2xx body as null data", () => {
  deepStrictEqual(interpretBackendResponse(204, ""), { ok: true, status: 204, data: null });
  deepStrictEqual(interpretBackendResponse(202, "  \n"), { ok: true, status: 202, data: null });
});

Deno.test("interpretBackendResponse() reports { ok: false } on a 2xx status as a rejection", () => {
  deepStrictEqual(
    interpretBackendResponse(
      200,
      '{"ok":false,"data":null,"error":{"code":"NOT_FOUND","message":"Design not found"}}',
    ),
    { ok: false, kind: "rejected", status: 200, code: "NOT_FOUND", message: "Design not found" },
  );
  deepStrictEqual(interpretBackendResponse(200, '{"ok":false,"error":"boom"}'), {
    ok: false,
    kind: "rejected",
    status: 200,
    code: null,
    message: "boom",
  });
});

Deno.test("interpretBackendResponse() reads error messages from common non-2xx bodies", () => {
  const cases: Array<[string, string | null, string | null]> = [
    [
      '{"ok":false,"error":{"code":"FORBIDDEN","message":"wrong project"}}',
      "FORBIDDEN",
      "wrong project",
    ],
    ['{"message":"organization mismatch"}', null, "organization mismatch"],
    ['{"statusCode":400,"error":"Bad Request","message":"limit too big"}', null, "limit too big"],
    [
      '{"message":["limit must be <= 100","offset must be >= 0"]}',
      null,
      "limit must be <= 100; offset must be >= 0",
    ],
    ['{"error":"Forbidden"}', null, "Forbidden"],
    ['{"detail":"Not Found"}', null, "Not Found"],
    [
      '{"detail":[{"msg":"field required"},{"msg":"value is not an integer"}]}',
      null,
      "field required; value is not an integer",
    ],
    ['{"code":"SQS_DISPATCH_FAILED"}', "SQS_DISPATCH_FAILED", null],
    ["upstream connect error", null, "upstream connect error"],
    ["<html><body>502 Bad Gateway</body></html>", null, null],
    ["", null, null],
  ];
  for (const [body, code, message] of cases) {
    deepStrictEqual(interpretBackendResponse(500, body), {
      ok: false,
      kind: "rejected",
      status: 500,
      code,
      message,
    }, body);
  }
});

Deno.test("interpretBackendResponse() reports invalid JSON on 2xx and cuts long bodies", () => {
  const outcome = interpretBackendResponse(200, "x".repeat(1000));
  strictEqual(outcome.ok, false);
  if (outcome.ok) return;
  strictEqual(outcome.kind, "invalid_response");
  ok(outcome.message.startsWith("the backend returned a body that is not valid JSON (HTTP 200)"));
  ok(outcome.message.length < 300, `message length ${outcome.message.length}`);
});

Deno.test("interpretBackendResponse() reports redirects as invalid responses", () => {
  const outcome = interpretBackendResponse(307, "");
  strictEqual(outcome.ok, false);
  if (!outcome.ok) strictEqual(outcome.kind, "invalid_response");
});

Deno.test("interpretBackendResponse() cuts a 5,000,000-character error message to a snippet", () => {
  const huge = "e".repeat(5_000_000);
  for (
    const body of [
      { error: { code: "VALIDATION", message: huge } },
      { message: huge },
      { message: Array.from({ length: 1_000_000 }, () => "bad field") },
      { detail: Array.from({ length: 1_000 }, () => ({ msg: huge.slice(0, 10_000) })) },
      { code: huge, error: huge },
    ]
  ) {
    const outcome = interpretBackendResponse(400, JSON.stringify(body));
    ok(!outcome.ok && outcome.kind === "rejected");
    if (outcome.ok || outcome.kind !== "rejected") continue;
    ok((outcome.message ?? "").length <= 600, `message of ${outcome.message?.length} characters`);
    ok((outcome.code ?? "").length <= 150, `code of ${outcome.code?.length} characters`);
  }
  const many = interpretBackendResponse(
    422,
    JSON.stringify({ message: Array.from({ length: 50 }, (_, i) => `m${i}`) }),
  );
  ok(!many.ok && many.kind === "rejected");
  if (!many.ok && many.kind === "rejected") {
    strictEqual(many.message, "m0; m1; m2; m3; m4; m5; m6; m7; m8; m9 (further messages left out)");
  }
});

Deno.test("interpretBackendResponse() refuses JSON nested deeper than 256 levels before parsing", () => {
  const deep = "[".repeat(1_000_000) + "]".repeat(1_000_000);
  const outcome = interpretBackendResponse(200, deep);
  deepStrictEqual(outcome, {
    ok: false,
    kind: "invalid_response",
    status: 200,
    message: "the backend answer (HTTP 200) nests JSON deeper than 256 levels",
  });
  const fine = "[".repeat(256) + "]".repeat(256);
  strictEqual(interpretBackendResponse(200, fine).ok, true);
});
