/**
 * The HTTP client of the backend internal API (`BACKEND_INTERNAL_URL`).
 *
 * Source: the design-code HTTP I/O contract, "MCP から Backend Internal API":
 * every request carries `Accept` and `Content-Type: application/json`,
 * `X-API-Key` (omitted when `BACKEND_INTERNAL_API_KEY` is unset) and
 * `X-MCP-Project-ID` (omitted when the caller's key has no project scope).
 *
 * @module
 */

import { log } from "../log/mod.ts";
import { buildBackendUrl } from "./backend_url.ts";
import { interpretBackendResponse } from "./interpret_response.ts";
import { type CappedBody, DEFAULT_MAX_RESPONSE_BYTES, readCappedText } from "./read_body.ts";
import type { BackendCallOptions, BackendClient, BackendOutcome, BackendRequest } from "./types.ts";

/** Options of {@link createBackendClient}. */
export interface BackendClientOptions {
  /** `BACKEND_INTERNAL_URL`: http(s) base URL, may carry a path prefix. */
  baseUrl: string;
  /** `BACKEND_INTERNAL_API_KEY`; when unset or empty no `X-API-Key` is sent. */
  apiKey?: string;
  /** How long one request may take, body included, in milliseconds. */
  timeoutMs: number;
  /** Largest answer read, in bytes; a longer one is an invalid response. @default 8 MiB */
  maxResponseBytes?: number;
  /** The fetch to use. @default globalThis.fetch */
  fetch?: typeof fetch;
}

/**
 * Creates a client for the backend internal API.
 *
 * Each request is aborted after `timeoutMs` or when the caller's signal
 * aborts, whichever comes first; redirects are not followed (they would take
 * `X-API-Key` elsewhere). Every failure of `send` is a {@link BackendOutcome}
 * the tools map to an `isError` result.
 *
 * @param options Base URL, key, timeout and optional fetch.
 * @returns The client.
 * @throws {TypeError} When `baseUrl` is not an http(s) URL.
 * @throws {RangeError} When `timeoutMs` is not a positive integer.
 *
 * @example
 * ```ts
 * const backend = createBackendClient({ baseUrl: "http://backend:3000", timeoutMs: 10_000 });
 * const outcome = await backend.send(
 *   { method: "GET", path: ["internal", "designs"], query: { project_id: 42 } },
 *   { projectId: 42 },
 * );
 * ```
 */
export function createBackendClient(options: BackendClientOptions): BackendClient {
  let parsed: URL;
  try {
    parsed = new URL(options.baseUrl);
  } catch {
    throw new TypeError(
      `Cannot create backend client: BACKEND_INTERNAL_URL ${
        JSON.stringify(options.baseUrl)
      } is not a URL`,
    );
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw new TypeError(
      `Cannot create backend client: BACKEND_INTERNAL_URL must be http or https, got ${
        JSON.stringify(parsed.protocol)
      }`,
    );
  }
  if (!Number.isSafeInteger(options.timeoutMs) || options.timeoutMs <= 0) {
    throw new RangeError(
      `Cannot create backend client: timeoutMs must be a positive integer, got ${options.timeoutMs}`,
    );
  }
  const maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  if (!Number.isSafeInteger(maxResponseBytes) || maxResponseBytes <= 0) {
    throw new RangeError(
      `Cannot create backend client: maxResponseBytes must be a positive integer, got ${maxResponseBytes}`,
    );
  }
  const baseUrl = options.baseUrl;
  const apiKey = options.apiKey ? options.apiKey : undefined;
  const timeoutMs = options.timeoutMs;
  const fetchImpl = options.fetch ?? globalThis.fetch;

  return {
    async send(request: BackendRequest, call: BackendCallOptions = {}): Promise<BackendOutcome> {
      const url = buildBackendUrl(baseUrl, request.path, request.query);
      const headers = new Headers({
        "Accept": "application/json",
        "Content-Type": "application/json",
      });
      if (apiKey !== undefined) headers.set("X-API-Key", apiKey);
      if (typeof call.projectId === "number") {
        headers.set("X-MCP-Project-ID", String(call.projectId));
      }
      const timeout = AbortSignal.timeout(timeoutMs);
      const signal = call.signal ? AbortSignal.any([timeout, call.signal]) : timeout;
      // For logs: the path without the base URL, which stays out of tool results.
      const where = `${request.method} /${request.path.join("/")}`;
      const started = performance.now();

      let status: number;
      let body: CappedBody;
      try {
        const response = await fetchImpl(url, {
          method: request.method,
          headers,
          body: request.body === undefined ? undefined : JSON.stringify(request.body),
          signal,
          redirect: "manual",
        });
        status = response.status;
        // The signal also covers reading the body, so a backend that stalls
        // mid-body still times out.
        body = await readCappedText(response, maxResponseBytes);
      } catch (error) {
        const detail = error instanceof Error
          ? [error.message, error.cause instanceof Error ? error.cause.message : undefined]
            .filter((part) => part !== undefined).join(": ")
          : String(error);
        if (call.signal?.aborted && !timeout.aborted) {
          log("info", "backend", `${where} cancelled by the caller`);
          return { ok: false, kind: "cancelled", message: "the request was cancelled" };
        }
        if (timeout.aborted) {
          log("warn", "backend", `${where} timed out`, { timeoutMs });
          return {
            ok: false,
            kind: "unavailable",
            reason: "timeout",
            message: `the backend internal API did not answer within ${timeoutMs} ms`,
          };
        }
        log("warn", "backend", `${where} failed: backend unreachable`, { detail });
        return {
          ok: false,
          kind: "unavailable",
          reason: "unreachable",
          message: "the backend internal API could not be reached",
        };
      }
      if (!body.ok) {
        const size = body.declared !== undefined
          ? `declares ${body.declared} bytes`
          : `passed ${body.read} bytes`;
        log("warn", "backend", `${where} answer too large`, { status, maxResponseBytes });
        return {
          ok: false,
          kind: "invalid_response",
          status,
          message:
            `the backend answer (HTTP ${status}) ${size}, more than the ${maxResponseBytes}-byte ` +
            "limit ([backend] max_response_bytes)",
        };
      }
      const outcome = interpretBackendResponse(status, body.text);
      log(outcome.ok ? "debug" : "warn", "backend", `${where} answered HTTP ${status}`, {
        ms: Math.round(performance.now() - started),
        ...(outcome.ok ? {} : { kind: outcome.kind }),
      });
      return outcome;
    },
  };
}
