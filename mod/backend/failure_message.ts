/**
 * Maps a failed backend request to the message a design-code tool returns in
 * its `isError` result (`structuredContent.error`).
 *
 * Source: the design-code HTTP I/O contract, scenario table — backend scope
 * refusal → "mapped validation message"; not found → "mapped not-found
 * message"; unreachable → "service-unavailable text"; SQS dispatch failure
 * and AI-v2 `ok: false` → the backend's failure mapped to `isError`.
 *
 * @module
 */

import type { BackendFailure } from "./types.ts";

/**
 * Error codes an `ok: false` envelope may carry, matched by substring, and
 * the HTTP status class each stands for. Used when the envelope came with a
 * 2xx status, so the status itself says nothing. The AI-v2 example code is
 * `NOT_FOUND`; the others are the usual spellings of the same classes.
 */
const CODE_CLASSES: ReadonlyArray<readonly [RegExp, number]> = [
  [/NOT_FOUND/, 404],
  [/VALIDATION|INVALID|BAD_REQUEST|UNPROCESSABLE/, 400],
  [/FORBIDDEN|SCOPE|PERMISSION|ACCESS_DENIED/, 403],
  [/UNAUTHORI[SZ]ED|UNAUTHENTICATED/, 401],
  [/CONFLICT/, 409],
  [/RATE_LIMIT|TOO_MANY/, 429],
  [/UNAVAILABLE/, 503],
];

/** Backend 404 texts that add nothing to the tool's own not-found sentence. */
const GENERIC_NOT_FOUND = new Set(["not found", "not_found", "404 not found", "404"]);

/**
 * Describes a failure in one sentence without a final period.
 *
 * | failure | message |
 * |---|---|
 * | 400, 422 | `Validation failed: <backend message>` |
 * | 401 | the backend refused this server's `BACKEND_INTERNAL_API_KEY` |
 * | 403 | `Scope validation failed: <backend message>` |
 * | 404 | `notFound`, plus the backend message when it adds something |
 * | 409 | `Conflict: <backend message>` |
 * | 429 | `Backend rate limit reached: …` |
 * | 502, 503, 504 | `Backend service unavailable (HTTP n): …` |
 * | other 5xx | `Backend error (HTTP n): …` |
 * | `ok: false` on 2xx | the class of its `error.code`, else `Backend error (CODE): …` |
 * | unreachable, timeout | `Backend service unavailable: …` |
 * | invalid JSON, redirect | `Invalid backend response: …` |
 *
 * @param failure What went wrong.
 * @param notFound The tool's not-found sentence, e.g. "Design not found: 42_a_1:2".
 * @returns The message.
 */
export function describeBackendFailure(failure: BackendFailure, notFound: string): string {
  switch (failure.kind) {
    case "unavailable":
      return `Backend service unavailable: ${failure.message}`;
    case "cancelled":
      return `Request cancelled: ${failure.message}`;
    case "invalid_response":
      return `Invalid backend response: ${failure.message}`;
    case "rejected":
      break;
  }

  const { status, code, message } = failure;
  const okEnvelopeFailure = status >= 200 && status < 300;
  const effective = okEnvelopeFailure ? classOfCode(code) : status;
  // How to name the status in a message: the HTTP status, or the envelope code.
  const label = okEnvelopeFailure ? (code ?? "ok: false") : `HTTP ${status}`;
  const detail = message ?? (code !== null && !okEnvelopeFailure ? code : null);

  switch (effective) {
    case 400:
    case 422:
      return `Validation failed: ${detail ?? `the backend rejected the arguments (${label})`}`;
    case 401:
      return `The backend rejected this server's credentials (${label}); ` +
        "check BACKEND_INTERNAL_API_KEY";
    case 403:
      return `Scope validation failed: ${
        detail ?? `the backend refused access for this project scope (${label})`
      }`;
    case 404:
      return detail !== null && !GENERIC_NOT_FOUND.has(detail.toLowerCase()) &&
          detail.toLowerCase() !== notFound.toLowerCase()
        ? `${notFound} (${detail})`
        : notFound;
    case 409:
      return `Conflict: ${detail ?? `the backend reported a conflict (${label})`}`;
    case 429:
      return `Backend rate limit reached (${label})${detail ? `: ${detail}` : ""}; retry later`;
    case 502:
    case 503:
    case 504:
      return `Backend service unavailable (${label})${detail ? `: ${detail}` : ""}`;
    default:
      return `Backend error (${label})${detail ? `: ${detail}` : ""}`;
  }
}

/** The status class of an envelope error code, or 0 (generic) when none fits. */
function classOfCode(code: string | null): number {
  if (code === null) return 0;
  const upper = code.toUpperCase();
  for (const [pattern, status] of CODE_CLASSES) {
    if (pattern.test(upper)) return status;
  }
  return 0;
}
