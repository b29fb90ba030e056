import { strictEqual } from "node:assert";
import { describeBackendFailure } from "./failure_message.ts";
import type { BackendFailure } from "./types.ts";

const NOT_FOUND = "Des2Code result not found for this design";

function rejected(status: number, code: string | null, message: string | null): BackendFailure {
  return { ok: false, kind: "rejected", status, code, message };
}

Deno.test("describeBackendFailure() maps HTTP statuses to the contract's error classes", () => {
  const cases: Array<[BackendFailure, string]> = [
    [rejected(400, null, "limit must be <= 100"), "Validation failed: limit must be <= 100"],
    [rejected(422, null, null), "Validation failed: the backend rejected the arguments (HTTP 422)"],
    [
      rejected(403, "SCOPE_MISMATCH", "Project 7 is not accessible"),
      "Scope validation failed: Project 7 is not accessible",
    ],
    [
      rejected(403, null, null),
      "Scope validation failed: the backend refused access for this project scope (HTTP 403)",
    ],
    [
      rejected(401, null, "bad key"),
      "The backend rejected this server's credentials (HTTP 401); check BACKEND_INTERNAL_API_KEY",
    ],
    [rejected(404, "NOT_FOUND", NOT_FOUND), NOT_FOUND],
    [rejected(404, null, "Not Found"), NOT_FOUND],
    [rejected(404, null, null), NOT_FOUND],
    [
      rejected(404, null, "Project 42 has no such design"),
      `${NOT_FOUND} (Project 42 has no such design)`,
    ],
    [rejected(409, null, "job already running"), "Conflict: job already running"],
    [rejected(429, null, null), "Backend rate limit reached (HTTP 429); retry later"],
    [rejected(503, null, "AI-v2 down"), "Backend service unavailable (HTTP 503): AI-v2 down"],
    [
      rejected(500, "SQS_DISPATCH_FAILED", "Failed to send des2code message"),
      "Backend error (HTTP 500): Failed to send des2code message",
    ],
    [rejected(500, "SQS_DISPATCH_FAILED", null), "Backend error (HTTP 500): SQS_DISPATCH_FAILED"],
    [rejected(418, null, null), "Backend error (HTTP 418)"],
  ];
  for (const [failure, expected] of cases) {
    strictEqual(describeBackendFailure(failure, NOT_FOUND), expected);
  }
});

Deno.test("describeBackendFailure() classifies ok:false envelopes on 2xx by their error code", () => {
  const cases: Array<[BackendFailure, string]> = [
    [rejected(200, "NOT_FOUND", "Design not found"), `${NOT_FOUND} (Design not found)`],
    [rejected(200, "DESIGN_NOT_FOUND", null), NOT_FOUND],
    [rejected(200, "VALIDATION_ERROR", "bad id"), "Validation failed: bad id"],
    [rejected(200, "forbidden", "nope"), "Scope validation failed: nope"],
    [
      rejected(200, "AI_READ_FAILED", "timeout reading AI-v2"),
      "Backend error (AI_READ_FAILED): timeout reading AI-v2",
    ],
    [rejected(200, null, "boom"), "Backend error (ok: false): boom"],
  ];
  for (const [failure, expected] of cases) {
    strictEqual(describeBackendFailure(failure, NOT_FOUND), expected);
  }
});

Deno.test("describeBackendFailure() words unavailable, cancelled and invalid responses", () => {
  strictEqual(
    describeBackendFailure(
      {
        ok: false,
        kind: "unavailable",
        reason: "unreachable",
        message: "the backend internal API could not be reached",
      },
      NOT_FOUND,
    ),
    "Backend service unavailable: the backend internal API could not be reached",
  );
  strictEqual(
    describeBackendFailure(
      { ok: false, kind: "cancelled", message: "the request was cancelled" },
      NOT_FOUND,
    ),
    "Request cancelled: the request was cancelled",
  );
  strictEqual(
    describeBackendFailure({
      ok: false,
      kind: "invalid_response",
      status: 200,
      message: "not JSON",
    }, NOT_FOUND),
    "Invalid backend response: not JSON",
  );
});
