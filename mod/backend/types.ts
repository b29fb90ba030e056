/**
 * The shapes shared by the design-code backend client and the tools that use
 * it: one request to the backend internal API, and what came of it.
 *
 * Source: the design-code HTTP I/O contract, "MCP から Backend Internal API".
 *
 * @module
 */

/** One request to the backend internal API. */
export interface BackendRequest {
  /** HTTP method; the contract uses only these two. */
  method: "GET" | "POST";
  /**
   * Path segments below the base URL, not yet encoded, e.g.
   * `["internal", "des2code", "42_hDDA9BNori9OTXSClduXqR_40002029:37033"]`.
   * Each is percent-encoded on its own, so a `:` or `/` inside an id stays
   * inside its segment.
   */
  path: readonly string[];
  /**
   * Query parameters, in order. `undefined` and `null` values are left out,
   * so optional inputs the caller did not give never reach the backend.
   */
  query?: Readonly<Record<string, string | number | undefined | null>>;
  /** JSON body (POST only); serialized with `JSON.stringify`. */
  body?: unknown;
}

/** Per-call options of {@link BackendClient.send}. */
export interface BackendCallOptions {
  /** Aborts the request, e.g. when the MCP client cancels the tool call. */
  signal?: AbortSignal;
  /**
   * The project the caller's API key is bound to; sent as
   * `X-MCP-Project-ID`. `null` or `undefined` (unbound key, stdio) omits
   * the header.
   */
  projectId?: number | null;
}

/** The backend answered 2xx with a JSON value (an envelope already unwrapped). */
export interface BackendSuccess {
  /** Discriminant: the backend accepted the request. */
  ok: true;
  /** HTTP status. */
  status: number;
  /** The payload: the raw JSON body, or the envelope's `data`; `null` for an empty body. */
  data: unknown;
}

/**
 * The backend answered and refused: a non-2xx status, or a 2xx envelope with
 * `ok: false`.
 */
export interface BackendRejection {
  /** Discriminant: the call failed. */
  ok: false;
  /** Which failure: the backend answered with a refusal. */
  kind: "rejected";
  /** HTTP status (2xx when an `ok: false` envelope came with a success status). */
  status: number;
  /** The backend's machine-readable error code (envelope `error.code`), if any. */
  code: string | null;
  /** The backend's human-readable message, if it sent one. */
  message: string | null;
}

/** The backend answered something that cannot be used (not JSON, a redirect). */
export interface BackendInvalidResponse {
  /** Discriminant: the call failed. */
  ok: false;
  /** Which failure: the answer was unusable. */
  kind: "invalid_response";
  /** HTTP status. */
  status: number;
  /** What was wrong with the answer. */
  message: string;
}

/** No answer: the backend could not be reached or did not answer in time. */
export interface BackendUnavailable {
  /** Discriminant: the call failed. */
  ok: false;
  /** Which failure: no answer arrived. */
  kind: "unavailable";
  /** `timeout`: no answer within the configured time; `unreachable`: connection failed. */
  reason: "timeout" | "unreachable";
  /** What happened, for the model (no internal URL in it). */
  message: string;
}

/** The caller's signal aborted the request (the MCP client cancelled). */
export interface BackendCancelled {
  /** Discriminant: the call failed. */
  ok: false;
  /** Which failure: the caller aborted. */
  kind: "cancelled";
  /** Fixed text for the result. */
  message: string;
}

/** Every way a request that did not succeed can end. */
export type BackendFailure =
  | BackendRejection
  | BackendInvalidResponse
  | BackendUnavailable
  | BackendCancelled;

/** What {@link BackendClient.send} resolves to; it never rejects. */
export type BackendOutcome = BackendSuccess | BackendFailure;

/** The backend internal API as the design-code tools see it. */
export interface BackendClient {
  /**
   * Sends one request and resolves with its outcome: network failures,
   * timeouts and unusable answers are {@link BackendFailure}s. Rejects only on
   * a caller bug, a path segment that is empty, `.` or `..` (`TypeError`).
   */
  send(request: BackendRequest, options?: BackendCallOptions): Promise<BackendOutcome>;
}
