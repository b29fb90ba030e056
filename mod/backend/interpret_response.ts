/**
 * Turns one HTTP answer of the backend internal API into a
 * {@link BackendOutcome}: unwraps `{ ok, data, error }` envelopes, accepts raw
 * JSON, and pulls an error message out of the common error body shapes.
 *
 * Source: `source/http-io-contract.ja.md` — "Backend internal API は raw JSON
 * payload または { "ok": true, "data": ... } envelope を返してよい", and the
 * AI-v2 success/error envelopes `{ ok, data, error: { code, message } }`.
 *
 * @module
 */

import type { BackendOutcome } from "./types.ts";

/** Longest piece of a non-JSON error body quoted back to the model. */
const MAX_TEXT_SNIPPET = 200;

/**
 * Interprets a status and body text.
 *
 * - 2xx, empty body → success with `data: null`;
 * - 2xx, `{ ok: true, data }` → success with `data`;
 * - 2xx, `{ ok: false, error }` → rejection with the envelope's code and message;
 * - 2xx, any other JSON → success with the raw value;
 * - 2xx, not JSON → invalid response;
 * - 3xx → invalid response (redirects are not followed: they would carry
 *   `X-API-Key` to wherever the redirect points);
 * - anything else → rejection, with a message from the body when it has one.
 *
 * @param status HTTP status of the answer.
 * @param text The whole body as text.
 * @returns The outcome; never throws.
 */
export function interpretBackendResponse(status: number, text: string): BackendOutcome {
  const trimmed = text.trim();
  let body: unknown = undefined;
  let isJson = false;
  if (trimmed !== "") {
    try {
      body = JSON.parse(trimmed);
      isJson = true;
    } catch {
      isJson = false;
    }
  }

  if (status >= 200 && status < 300) {
    if (trimmed === "") return { ok: true, status, data: null };
    if (!isJson) {
      return {
        ok: false,
        kind: "invalid_response",
        status,
        message: `the backend returned a body that is not valid JSON (HTTP ${status}): ` +
          JSON.stringify(snippet(trimmed)),
      };
    }
    if (isEnvelope(body)) {
      if (body.ok === true) return { ok: true, status, data: body.data ?? null };
      const detail = errorDetail(body);
      return { ok: false, kind: "rejected", status, code: detail.code, message: detail.message };
    }
    return { ok: true, status, data: body };
  }

  if (status >= 300 && status < 400) {
    return {
      ok: false,
      kind: "invalid_response",
      status,
      message: `the backend answered with a redirect (HTTP ${status}), which is not followed`,
    };
  }

  const detail = isJson ? errorDetail(body) : { code: null, message: textMessage(trimmed) };
  return { ok: false, kind: "rejected", status, code: detail.code, message: detail.message };
}

/** An `{ ok, data, error }` envelope: a boolean `ok` plus `data` or `error`. */
interface Envelope {
  ok: boolean;
  data?: unknown;
  error?: unknown;
}

function isEnvelope(value: unknown): value is Envelope {
  return isRecord(value) && typeof value.ok === "boolean" && ("data" in value || "error" in value);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function nonEmptyString(value: unknown): string | null {
  return typeof value === "string" && value.trim() !== "" ? value.trim() : null;
}

/**
 * Reads `{ code, message }` from an error body, first found wins: an
 * envelope's `error.message`, a raw body's `message` (string or list, as
 * NestJS sends), `error` as a string, FastAPI-style `detail` (string, or a
 * list of `{ msg }`).
 */
function errorDetail(body: unknown): { code: string | null; message: string | null } {
  if (!isRecord(body)) return { code: null, message: null };
  const error = body.error;
  let code: string | null = nonEmptyString(body.code);
  let message: string | null = null;
  if (isRecord(error)) {
    code = nonEmptyString(error.code) ?? code;
    message = nonEmptyString(error.message) ?? nonEmptyString(error.detail);
  }
  // NestJS: { statusCode, message: string | string[], error: "Bad Request" };
  // its `message` says more than the status phrase in `error`.
  message ??= stringOrList(body.message) ?? nonEmptyString(error);
  if (message === null) {
    const detail = body.detail;
    if (typeof detail === "string") {
      message = nonEmptyString(detail);
    } else if (Array.isArray(detail)) {
      const parts = detail
        .map((item) => (isRecord(item) ? nonEmptyString(item.msg) : nonEmptyString(item)))
        .filter((part): part is string => part !== null);
      message = parts.length > 0 ? parts.join("; ") : null;
    }
  }
  return { code, message };
}

/** A non-empty string, or a list of strings joined with "; ". */
function stringOrList(value: unknown): string | null {
  if (!Array.isArray(value)) return nonEmptyString(value);
  const parts = value.map(nonEmptyString).filter((part): part is string => part !== null);
  return parts.length > 0 ? parts.join("; ") : null;
}

/** A short plain-text error body, or null for HTML pages (proxies' error pages). */
function textMessage(text: string): string | null {
  if (text === "" || text.startsWith("<")) return null;
  return snippet(text);
}

function snippet(text: string): string {
  const flat = text.replace(/\s+/g, " ");
  return flat.length > MAX_TEXT_SNIPPET ? `${flat.slice(0, MAX_TEXT_SNIPPET)}…` : flat;
}
