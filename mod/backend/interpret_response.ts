/**
 * Turns one HTTP answer of the backend internal API into a
 * {@link BackendOutcome}: unwraps `{ ok, data, error }` envelopes, accepts raw
 * JSON, and pulls an error message out of the common error body shapes.
 *
 * Source: the design-code HTTP I/O contract — "Backend internal API は raw JSON
 * payload または { "ok": true, "data": ... } envelope を返してよい", and the
 * AI-v2 success/error envelopes `{ ok, data, error: { code, message } }`.
 *
 * @module
 */

import { jsonNestingExceeds } from "./json_depth.ts";
import { joinSnippets, snippet } from "./snippet.ts";
import type { BackendOutcome } from "./types.ts";

/** Longest piece of a non-JSON error body quoted back to the model. */
const MAX_TEXT_SNIPPET = 200;

/** Longest error code kept, in characters. */
const MAX_CODE_CHARS = 100;

/**
 * Deepest JSON nesting accepted from the backend. Real payloads are a few
 * levels deep; a bound keeps any later recursive walk (ours, the SDK's,
 * `JSON.stringify` with indentation) far from the stack limit.
 */
export const MAX_BACKEND_JSON_DEPTH = 256;

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
  if (trimmed !== "" && jsonNestingExceeds(trimmed, MAX_BACKEND_JSON_DEPTH)) {
    return {
      ok: false,
      kind: "invalid_response",
      status,
      message: `the backend answer (HTTP ${status}) nests JSON deeper than ` +
        `${MAX_BACKEND_JSON_DEPTH} levels`,
    };
  }
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
          JSON.stringify(shortSnippet(trimmed)),
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
  if (code !== null) code = snippet(code, MAX_CODE_CHARS);
  // NestJS: { statusCode, message: string | string[], error: "Bad Request" };
  // its `message` says more than the status phrase in `error`.
  message ??= stringOrList(body.message) ?? nonEmptyString(error);
  if (message === null) {
    const detail = body.detail;
    if (typeof detail === "string") {
      message = nonEmptyString(detail);
    } else if (Array.isArray(detail)) {
      const parts = listParts(
        detail,
        (item) => (isRecord(item) ? nonEmptyString(item.msg) : nonEmptyString(item)),
      );
      message = parts.length > 0 ? joinSnippets(parts) : null;
    }
  }
  // Whatever the source, what reaches a tool text is a bounded snippet.
  return { code, message: message === null ? null : snippet(message) };
}

/** A non-empty string, or a list of strings joined with "; ". */
function stringOrList(value: unknown): string | null {
  if (!Array.isArray(value)) return nonEmptyString(value);
  const parts = listParts(value, nonEmptyString);
  return parts.length > 0 ? joinSnippets(parts) : null;
}

/**
 * The usable parts of a message list, in one flat loop (no recursion into
 * nested lists; a nested list is not a message), stopping once enough
 * parts for a snippet are found so a million-item list costs little.
 */
function listParts(items: readonly unknown[], pick: (item: unknown) => string | null): string[] {
  const parts: string[] = [];
  for (const item of items) {
    const part = pick(item);
    if (part !== null) parts.push(part);
    // One more than shown, so the joined text can say that some were left out.
    if (parts.length > 10) break;
  }
  return parts;
}

/** A short plain-text error body, or null for HTML pages (proxies' error pages). */
function textMessage(text: string): string | null {
  if (text === "" || text.startsWith("<")) return null;
  return shortSnippet(text);
}

function shortSnippet(text: string): string {
  return snippet(text, MAX_TEXT_SNIPPET);
}
