/**
 * Streamable HTTP on `Deno.serve`: `POST /mcp` in both protocol eras (the
 * SDK's `createMcpHandler`: 2026-07-28 per request with its `_meta`
 * envelope and `Mcp-Method` / `Mcp-Name` headers, and the 2025 era
 * statelessly, a new MCP server per request either way, SSE responses so
 * progress notifications reach the client), `GET /healthz`, Origin checks
 * against DNS rebinding, a body cap sized for two maximal images,
 * authentication before any MCP work, a cap on requests in flight per API
 * key, and a graceful shutdown. The public port belongs to a connection
 * guard (header, body-rate and idle deadlines, connection caps per process
 * and per client, a connect rate per client), which relays to `Deno.serve`
 * on a private Unix socket (`guarded_serve.ts`).
 *
 * Cancellation follows the era. Under 2026-07-28 a client cancels a request
 * by closing its response stream ("The server MUST treat a client
 * disconnect as cancellation", basic/patterns/cancellation): the tool's job
 * is cancelled through the shared store, on whichever replica runs it.
 * Under 2025 revisions a disconnect is not a cancellation (it "SHOULD NOT
 * be interpreted as the client cancelling its request", 2025-11-25
 * basic/utilities/cancellation): the job goes on, listed and fetchable;
 * `notifications/cancelled` cancels it, and reaches the request even when
 * another replica holds it (`in_flight.ts`).
 *
 * `/healthz` answers 200 when the server can serve and 503 while it cannot
 * (its database is unavailable), with the reason in the body.
 *
 * @module
 */

import { concatBytes } from "../bytes/mod.ts";
import { log } from "../log/mod.ts";
import { clientKey } from "./client_address.ts";
import { CLIENT_ADDRESS_HEADER } from "./request_head.ts";
import { type GuardedServeOptions, serveGuarded } from "./guarded_serve.ts";
import {
  clientIdOf,
  type InFlightEntry,
  InFlightRequests,
  newClientId,
  SESSION_HEADER,
} from "./in_flight.ts";
import { MAX_REQUEST_BYTES } from "../mcp/limits.ts";
import { checkMessage } from "../mcp/message_checks.ts";
import type { McpFactoryContext, McpServer } from "../mcp/sdk.ts";
import { createMcpHandler, isLegacyRequest } from "../mcp/sdk.ts";
import type { ProtocolEra } from "../mcp/tasks.ts";
import type { Authenticator, AuthFailure } from "../auth/mod.ts";
import { isOAuthProbe, noOAuthResponse } from "../auth/mod.ts";
import type { Scope } from "../mcp/tool.ts";
import { CorsPolicy } from "./cors.ts";
import { type HealthFields, healthResponse } from "./health.ts";

/** One authenticated `/mcp` request, as the server factory sees it. */
export interface McpCall {
  /** The protocol era of the request (the SDK's classification). */
  era: ProtocolEra;
  /**
   * A 2025-era request's revision: its `MCP-Protocol-Version` header, or
   * 2025-03-26 when it has none (MCP 2025-06-18, transports: "the server
   * SHOULD assume protocol version 2025-03-26"); undefined under 2026-07-28.
   */
  protocolVersion?: string;
  /**
   * Once the request is aborted, whether its client cancelled it (see
   * `ToolContext.cancelled`): always under 2026-07-28; under 2025 revisions
   * only on `notifications/cancelled`, not on a disconnect.
   */
  cancelled(): boolean;
}

/**
 * Options of {@link startHttpServer}: where it listens and the guard's
 * limits ({@link GuardedServeOptions}: `[server] host`, `port`, …), then
 * what it serves.
 */
export interface HttpServerOptions extends GuardedServeOptions {
  /** Browser origins allowed to call `/mcp`; requests without `Origin` pass. */
  allowedOrigins: readonly string[];
  /** Authenticates every `/mcp` request. */
  authenticator: Pick<Authenticator, "authenticate">;
  /** Builds the MCP server for one authenticated request of `call.era`. */
  createServer: (scope: Scope, call: McpCall) => McpServer;
  /** Turns a failed authentication into a response. */
  authFailureResponse: (outcome: AuthFailure) => Response;
  /** Extra fields for `/healthz` (a promise must settle quickly: bound its own waits). */
  health?: () => HealthFields | Promise<HealthFields>;
  /** Largest accepted body (default {@link MAX_REQUEST_BYTES}). */
  maxBodyBytes?: number;
  /** Most requests of one API key in flight at once; one more gets 429 (default 32). */
  maxRequestsPerKey?: number;
  /**
   * A 2025-era `notifications/cancelled` for a request not in flight here:
   * the request may be open at another replica, which is told.
   */
  onCancelElsewhere?: (owner: string, requestId: string | number) => void;
  /**
   * Whether a `tools/call` of `tool` by `scope` would be refused now because
   * the generation queue is full (or the caller is past its share of it).
   * Such a call is answered as one JSON body instead of a stream, so that
   * the tool's refusal, whose text ends with `retry_after_seconds = N`
   * (mod/jobs/queue_full.ts), can carry `Retry-After: N`.
   */
  queueRefuses?: (scope: Scope, tool: string) => Promise<boolean>;
}

/** A running HTTP server. */
export interface HttpServerHandle {
  /** The bound address (port resolved when 0 was asked). */
  addr: Deno.NetAddr;
  /** Stops accepting connections and waits for in-flight requests, at most `graceMs`. */
  shutdown(graceMs: number): Promise<void>;
  /** Resolves when the server has stopped. */
  finished: Promise<void>;
  /** Cancels request `requestId` of API key `owner` when it is in flight here (another replica's notice). */
  cancelRequest(owner: string, requestId: string | number): boolean;
}

function jsonRpcError(
  status: number,
  code: number,
  message: string,
  headers?: HeadersInit,
  id: string | number | null = null,
  data?: Record<string, unknown>,
) {
  return new Response(
    JSON.stringify({ jsonrpc: "2.0", error: { code, message, ...(data ? { data } : {}) }, id }),
    { status, headers: { "content-type": "application/json", ...headers } },
  );
}

class BodyTooLarge extends Error {}

/** Reads a body up to `limit` bytes, failing fast when it grows past it. */
async function readBodyCapped(request: Request, limit: number): Promise<Uint8Array> {
  if (!request.body) return new Uint8Array();
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > limit) {
      await reader.cancel().catch(() => {});
      throw new BodyTooLarge();
    }
    chunks.push(value);
  }
  return chunks.length === 1 ? chunks[0] : concatBytes(chunks);
}

/**
 * `response` (a tool result: one JSON body, or a 2025-era stream, read to its
 * end) with `Retry-After: N` when it is a tool error saying
 * `retry_after_seconds = N` (a refusal of the generation queue); the same
 * body otherwise. Only calls the queue refused a moment ago come here, and
 * such a call is answered at once: should a slot have freed meanwhile, the
 * call runs and its answer comes whole at its end.
 */
async function withRetryAfter(response: Response): Promise<Response> {
  const type = response.headers.get("content-type") ?? "";
  if (!type.includes("application/json") && !type.includes("text/event-stream")) return response;
  const body = await response.text();
  const headers = new Headers(response.headers);
  const messages = type.includes("application/json")
    ? [body]
    : body.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5));
  for (const message of messages) {
    try {
      const result = (JSON.parse(message) as { result?: { isError?: boolean; content?: unknown } })
        .result;
      if (!result?.isError || !Array.isArray(result.content)) continue;
      const texts = result.content.map((c) => (c as { text?: unknown }).text);
      const seconds = texts.filter((t) => typeof t === "string").join("\n")
        .match(/retry_after_seconds = (\d+)/)?.[1];
      if (seconds) headers.set("retry-after", seconds);
    } catch {
      // Not a JSON-RPC message: passed on as it is.
    }
  }
  return new Response(body, { status: response.status, headers });
}

/** What the server factory needs of one admitted request. */
interface Admitted {
  scope: Scope;
  /** Set when a 2025-era client cancelled the request. */
  cancelled: boolean;
}

/** Starts the HTTP server; see the module documentation. */
export function startHttpServer(options: HttpServerOptions): Promise<HttpServerHandle> {
  const maxBody = options.maxBodyBytes ?? MAX_REQUEST_BYTES;
  // Replaced once the port is bound: the server's own loopback origins join the list.
  let cors = new CorsPolicy(options.allowedOrigins);
  const inFlight = new InFlightRequests();
  const maxPerKey = options.maxRequestsPerKey ?? 32;
  const perKey = new Map<string, number>();
  // The request the SDK hands the factory is the one admitted below, carrying its caller.
  const admitted = new WeakMap<Request, Admitted>();
  /** Set once the shutdown began: it aborts every request's signal, and calls are let finish. */
  let draining = false;
  const factory = (context: McpFactoryContext) => {
    const call = context.requestInfo && admitted.get(context.requestInfo);
    if (!call) throw new Error("an MCP server was asked for a request that was not admitted");
    return options.createServer(call.scope, {
      era: context.era,
      ...(context.era === "legacy"
        ? {
          protocolVersion: context.requestInfo?.headers.get("mcp-protocol-version") ??
            "2025-03-26",
        }
        : {}),
      cancelled: context.era === "modern" ? () => true : () => call.cancelled,
    });
  };
  const entry = (responseMode: "sse" | "auto") =>
    createMcpHandler(factory, {
      responseMode,
      maxRequestBodySize: maxBody,
      onerror: (error) => log("debug", "http", "MCP request refused", { error: error.message }),
    });
  // A 2026-07-28 tool call streams from the start: its progress flows, and keep-alive
  // comments every 15 s hold proxies that drop a silent response; every other request
  // is answered with one JSON body, an error with its HTTP status (400 for -32021).
  // (The 2025 era streams every request, as the SDK's stateless transport does.)
  const calls = entry("sse");
  const others = entry("auto");

  async function handleMcp(request: Request, info: Deno.ServeHandlerInfo): Promise<Response> {
    const declared = Number(request.headers.get("content-length") ?? "0");
    if (declared > maxBody) {
      return jsonRpcError(
        413,
        -32600,
        `request body of ${declared} bytes exceeds ${maxBody} bytes`,
      );
    }
    // The guard sets this header on every request and drops any a client sent.
    const address = request.headers.get(CLIENT_ADDRESS_HEADER);
    const source = address === null ? undefined : clientKey(address);
    const auth = await options.authenticator.authenticate(request, source);
    if (!auth.ok) return options.authFailureResponse(auth);
    if (request.method !== "POST") {
      // Stateless in both eras: no GET stream to resume, no session to DELETE.
      // Answered after the credentials: a client that opens the GET stream with a
      // refused key (mcp-remote and Codex open with it) reads the 401's reason, not a 405.
      return jsonRpcError(405, -32000, `method ${request.method} not allowed on /mcp; use POST`, {
        allow: "POST",
      });
    }
    // One key may not hold every connection and queue slot: its requests in
    // flight (a streaming tool call counts until its response ends) are capped.
    const keyPrefix = auth.scope.keyPrefix;
    const active = perKey.get(keyPrefix) ?? 0;
    if (active >= maxPerKey) {
      return jsonRpcError(
        429,
        -32000,
        `this API key has ${active} requests in flight, the most allowed ` +
          `(server.max_requests_per_key = ${maxPerKey}); retry when one has finished`,
        { "retry-after": "1" },
        null,
        { limit: "server.max_requests_per_key", value: maxPerKey, retry_after_seconds: 1 },
      );
    }
    perKey.set(keyPrefix, active + 1);
    let counted = true;
    const uncount = () => {
      if (!counted) return;
      counted = false;
      const left = (perKey.get(keyPrefix) ?? 1) - 1;
      if (left > 0) perKey.set(keyPrefix, left);
      else perKey.delete(keyPrefix);
    };
    info.completed.then(uncount, uncount);

    let bytes: Uint8Array;
    try {
      bytes = await readBodyCapped(request, maxBody);
    } catch (error) {
      if (error instanceof BodyTooLarge) {
        return jsonRpcError(413, -32600, `request body exceeds ${maxBody} bytes`);
      }
      return jsonRpcError(
        400,
        -32700,
        `the request body could not be read: ${(error as Error).message}`,
      );
    }
    // The JSON budget, no batches, 1 MiB unless an image tool call (mod/mcp/message_checks.ts).
    const checked = checkMessage(bytes);
    if (!checked.ok) {
      return jsonRpcError(checked.status, checked.code, checked.error, undefined, checked.id);
    }
    const parsedBody = checked.message;
    const legacy = await isLegacyRequest(request, parsedBody, { maxRequestBodySize: maxBody });
    // The body is read: the SDK gets it parsed, and a request of its own whose signal
    // aborts when the client goes (`request.signal`; deno.json's `no-legacy-abort`
    // keeps it from aborting delivered responses), when the exchange ends, or when a
    // 2025-era notification cancels it. A shutdown aborts every `request.signal` too,
    // while the running calls are let finish: from then on it is not heeded.
    const abort = new AbortController();
    request.signal.addEventListener("abort", () => draining || abort.abort(), { once: true });
    const forwarded = new Request(request.url, {
      method: "POST",
      headers: request.headers,
      signal: abort.signal,
    });
    const call: Admitted = { scope: auth.scope, cancelled: false };
    admitted.set(forwarded, call);
    const entries: InFlightEntry[] = [];
    const finish = () => {
      for (const entry of entries.splice(0)) entry.release();
      abort.abort();
    };
    info.completed.then(finish, finish);
    const message = (parsedBody ?? {}) as Record<string, unknown>;
    const initialize = legacy && message.method === "initialize";
    if (legacy) {
      // 2025 era: cancellation belongs to the client that sent the request: the
      // key and the server-issued client id (`mcp-session-id`, see in_flight.ts),
      // so another client of the same key cannot stop it by guessing its id.
      const clientId = clientIdOf(request);
      const owner = clientId === null ? null : `${keyPrefix}\u0000${clientId}`;
      const id = message.id;
      if (typeof id !== "string" && typeof id !== "number") {
        if (message.method === "notifications/cancelled" && owner !== null) {
          const target = (message.params as { requestId?: unknown } | undefined)?.requestId;
          if (typeof target === "string" || typeof target === "number") {
            if (inFlight.cancel(owner, target)) {
              log("info", "http", "request cancelled by the client", { requestId: target });
            } else {
              options.onCancelElsewhere?.(owner, target);
            }
          }
        }
      } else if (owner !== null) {
        // A cancellation aborts the request's handler, and with it the generation.
        entries.push(inFlight.register(owner, id, () => {
          call.cancelled = true;
          finish();
        }));
      }
    }
    const tool = message.method === "tools/call"
      ? (message.params as { name?: unknown } | undefined)?.name
      : undefined;
    // A call the queue refuses gets one JSON body, so its headers can say when to retry.
    const refused = typeof tool === "string" &&
      await (options.queueRefuses?.(auth.scope, tool).catch(() => false) ?? false);
    const mcp = message.method === "tools/call" && !refused ? calls : others;
    const answered = await mcp.fetch(forwarded, {
      parsedBody,
      authInfo: {
        token: "",
        clientId: keyPrefix,
        scopes: [auth.scope.permission],
        extra: { scope: auth.scope },
      },
    });
    const response = refused ? await withRetryAfter(answered) : answered;
    // The SDK sets `connection: keep-alive` on its event streams; connection
    // management is the server's (every connection carries one request), so
    // it is dropped instead of sent beside the server's `connection: close`.
    const issue = initialize && response.ok;
    if (!issue && !response.headers.has("connection")) return response;
    const headers = new Headers(response.headers);
    headers.delete("connection");
    // Issue a 2025-era client its id; clients send it back on every later request.
    if (issue) headers.set(SESSION_HEADER, newClientId());
    return new Response(response.body, { status: response.status, headers });
  }

  async function handler(request: Request, info: Deno.ServeHandlerInfo): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === "/healthz") {
      if (request.method !== "GET" && request.method !== "HEAD") {
        return new Response(null, { status: 405, headers: { allow: "GET, HEAD" } });
      }
      return healthResponse((await options.health?.()) ?? {});
    }
    if (url.pathname !== "/mcp") {
      // OAuth clients probe for an authorization server after a 401 and show what the
      // probe's body says: it tells them the credentials' fate (auth_response.ts).
      if (!isOAuthProbe(url.pathname)) return new Response("not found\n", { status: 404 });
      const address = request.headers.get(CLIENT_ADDRESS_HEADER);
      const auth = await options.authenticator.authenticate(
        request,
        address === null ? undefined : clientKey(address),
      );
      return noOAuthResponse(auth.ok ? null : auth);
    }
    const origin = request.headers.get("origin");
    if (origin !== null && !cors.allows(origin)) {
      // DNS-rebinding protection: a browser page from another origin must not
      // reach a server on the user's machine (MCP 2025-11-25 transports: 403).
      return jsonRpcError(403, -32000, `origin ${origin} is not allowed (server.allowed_origins)`);
    }
    // A CORS preflight carries no credentials: answer it before authentication.
    if (request.method === "OPTIONS") return cors.preflight(origin);
    try {
      return cors.decorate(await handleMcp(request, info), origin);
    } catch (error) {
      log("error", "http", "request failed", { error: (error as Error)?.stack ?? String(error) });
      return cors.decorate(jsonRpcError(500, -32603, "internal server error"), origin);
    }
  }

  return serveGuarded(options, handler).then((served) => {
    const addr = served.addr;
    cors = new CorsPolicy(options.allowedOrigins, addr.port);
    log("info", "http", `listening on http://${addr.hostname}:${addr.port}/mcp`);
    return {
      addr,
      finished: served.finished,
      shutdown: async (graceMs: number) => {
        draining = true;
        await served.shutdown(graceMs);
        await Promise.all([calls.close(), others.close()]);
      },
      cancelRequest(owner, requestId) {
        const done = inFlight.cancel(owner, requestId);
        if (done) log("info", "http", "request cancelled at another replica", { requestId });
        return done;
      },
    } satisfies HttpServerHandle;
  });
}
