/**
 * A local HTTP server for downloader tests: serves fixed bytes at `/file`
 * with `Range` support, and can misbehave on purpose (cut the connection,
 * ignore Range, send wrong bytes, answer an error status, stall).
 * Test support only; nothing in the server imports it.
 *
 * @module
 */

/** How the server answers one request (decided per request number, 1-based). */
export type Behavior =
  | { kind: "normal" }
  | { kind: "cut"; after: number }
  | { kind: "ignore_range" }
  | { kind: "serve"; bytes: Uint8Array }
  | { kind: "status"; status: number }
  | { kind: "stall"; after: number };

/** One request the server saw. */
export interface SeenRequest {
  /** The `Range` header, or null. */
  range: string | null;
  /** The status answered. */
  status: number;
}

/** A running fixture server. */
export interface FixtureServer {
  /** URL of the served file. */
  url: string;
  /** Requests seen so far. */
  requests: SeenRequest[];
  /** Stops the server and cancels pending stalled streams. */
  close(): Promise<void>;
}

/**
 * Starts a server on 127.0.0.1 (port 0 = any free port) serving `content`.
 *
 * @param behave picks the behaviour of request `n` (1-based); default normal
 */
export function startFixtureServer(
  content: Uint8Array,
  behave: (n: number) => Behavior = () => ({ kind: "normal" }),
): Promise<FixtureServer> {
  const requests: SeenRequest[] = [];
  const stalled: ReadableStreamDefaultController<Uint8Array>[] = [];
  const ac = new AbortController();
  return new Promise((resolveStart) => {
    const server = Deno.serve({
      hostname: "127.0.0.1",
      port: 0,
      signal: ac.signal,
      onListen: ({ port }) => {
        resolveStart({
          url: `http://127.0.0.1:${port}/file`,
          requests,
          close: async () => {
            for (const c of stalled) {
              try {
                c.error(new Error("server closing"));
              } catch {
                // already closed
              }
            }
            ac.abort();
            await server.finished;
          },
        });
      },
    }, (req) => {
      const range = req.headers.get("range");
      const behavior = behave(requests.length + 1);
      const record = (status: number) => requests.push({ range, status });
      if (behavior.kind === "status") {
        record(behavior.status);
        return new Response("nope", { status: behavior.status });
      }
      if (behavior.kind === "serve") {
        record(200);
        return new Response(behavior.bytes.slice(), { status: 200 });
      }
      let start = 0;
      let status = 200;
      const m = range?.match(/^bytes=(\d+)-$/);
      if (m && behavior.kind !== "ignore_range") {
        start = Number(m[1]);
        if (start >= content.length) {
          record(416);
          return new Response(null, {
            status: 416,
            headers: { "content-range": `bytes */${content.length}` },
          });
        }
        status = 206;
      }
      const body = content.subarray(start);
      const headers: Record<string, string> = { "content-length": String(body.length) };
      if (status === 206) {
        headers["content-range"] = `bytes ${start}-${content.length - 1}/${content.length}`;
      }
      record(status);
      if (behavior.kind === "cut" || behavior.kind === "stall") {
        const head = body.subarray(0, behavior.after);
        const stream = new ReadableStream<Uint8Array>({
          start(controller) {
            controller.enqueue(head.slice());
            if (behavior.kind === "cut") {
              // Erroring the body stream makes Deno drop the connection mid-body.
              setTimeout(() => controller.error(new Error("cut by fixture server")), 10);
            } else {
              stalled.push(controller);
            }
          },
        });
        return new Response(stream, { status, headers });
      }
      return new Response(body.slice(), { status, headers });
    });
  });
}
