/**
 * A real HTTP server on loopback that plays the backend internal API in
 * tests: it records every request exactly as it arrived and answers with
 * whatever the test's reply function says. Test-only; not re-exported from
 * `mod.ts` (import `mod/backend/testing.ts` directly, e.g. from `tests/`).
 *
 * @module
 */

/** One request as the fake backend received it. */
export interface RecordedRequest {
  /** HTTP method. */
  method: string;
  /** Path as sent, still percent-encoded (e.g. `/internal/des2code/42_a_1%3A2`). */
  path: string;
  /** Query string as sent, without `?` (`""` when none). */
  query: string;
  /** Every header, names lower-cased. */
  headers: Record<string, string>;
  /** Body text (`""` when none). */
  body: string;
}

/** How the fake backend answers one request. */
export interface FakeReply {
  /** HTTP status. @default 200 */
  status?: number;
  /** A value sent as JSON (ignored when `text` is set). */
  json?: unknown;
  /** A raw body, sent as is (e.g. invalid JSON). */
  text?: string;
  /** Extra response headers. */
  headers?: Record<string, string>;
  /** Never answer until the server closes (to test timeouts). */
  hang?: boolean;
}

/** Decides the reply to a request. */
export type FakeReplyFn = (request: RecordedRequest) => FakeReply | Promise<FakeReply>;

/** A running fake backend. */
export interface FakeBackend {
  /** Base URL, e.g. `http://127.0.0.1:41234`. */
  readonly url: string;
  /** Every request received so far, in order. */
  readonly requests: RecordedRequest[];
  /** Replaces the reply function. */
  setReply(reply: FakeReplyFn): void;
  /** Releases hanging requests and stops the server. */
  close(): Promise<void>;
}

/**
 * Starts a fake backend on 127.0.0.1 on a free port.
 *
 * @param reply The reply function. @default a `200 {}` for every request
 * @returns The running server; `close()` it when done.
 */
export async function startFakeBackend(
  reply: FakeReplyFn = () => ({ json: {} }),
): Promise<FakeBackend> {
  let current = reply;
  const requests: RecordedRequest[] = [];
  const releases: Array<() => void> = [];
  const closed = new Promise<void>((resolve) => releases.push(resolve));
  const listening = Promise.withResolvers<Deno.NetAddr>();

  const server = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    onListen: (addr) => listening.resolve(addr as Deno.NetAddr),
  }, async (request) => {
    const url = new URL(request.url);
    const headers: Record<string, string> = {};
    request.headers.forEach((value, name) => {
      headers[name.toLowerCase()] = value;
    });
    const recorded: RecordedRequest = {
      method: request.method,
      path: url.pathname,
      query: url.search.replace(/^\?/, ""),
      headers,
      body: await request.text(),
    };
    requests.push(recorded);
    const answer = await current(recorded);
    if (answer.hang) {
      await closed;
      return new Response(null, { status: 503 });
    }
    const body = answer.text ?? (answer.json === undefined ? null : JSON.stringify(answer.json));
    return new Response(body, {
      status: answer.status ?? 200,
      headers: {
        "content-type": answer.text === undefined ? "application/json" : "text/plain",
        ...answer.headers,
      },
    });
  });
  const addr = await listening.promise;

  return {
    url: `http://127.0.0.1:${addr.port}`,
    requests,
    setReply(next: FakeReplyFn) {
      current = next;
    },
    async close() {
      for (const release of releases) release();
      await server.shutdown();
    },
  };
}

/**
 * A loopback URL on which nothing listens: a port that was just bound and
 * released again, so connecting to it is refused.
 *
 * @returns e.g. `http://127.0.0.1:41235`.
 */
export function closedPortUrl(): string {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return `http://127.0.0.1:${port}`;
}
