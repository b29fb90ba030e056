/**
 * What the HTTP benchmarks (bench/auth_bench.ts, auth_flood_bench.ts,
 * bench/http_bench.ts) share: a raw, timed `tools/list` POST, requests run
 * a fixed number of times with a bounded number in flight, and the
 * nearest-rank percentile their summaries report.
 *
 * @module
 */

/** The body of every benchmarked request. */
const TOOLS_LIST_BODY = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" });

/** One timed round trip. */
export interface TimedResponse {
  /** The HTTP status. */
  status: number;
  /** The whole response body (the SSE stream, read to its end). */
  text: string;
  /** From sending the request to the body's last byte, ms. */
  ms: number;
}

/**
 * POSTs `{"jsonrpc":"2.0","id":1,"method":"tools/list"}` to `url` with
 * `Accept: application/json, text/event-stream` and reads the whole
 * response, so the time is a full round trip.
 *
 * @param url The MCP endpoint, e.g. `http://127.0.0.1:8080/mcp`.
 * @param headers Sent besides `content-type` and `accept` (the API key, `X-MCP-Token`).
 * @returns The status, the body and the latency.
 */
export async function timeToolsList(
  url: string,
  headers: Record<string, string>,
): Promise<TimedResponse> {
  const started = performance.now();
  const response = await fetch(url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      ...headers,
    },
    body: TOOLS_LIST_BODY,
  });
  const text = await response.text();
  return { status: response.status, text, ms: performance.now() - started };
}

/**
 * Calls `fn` `total` times with at most `concurrency` calls in flight.
 *
 * @param total How many calls in all.
 * @param concurrency How many lanes call it, each one call after the other.
 * @param fn One call.
 * @returns Every call's result, in the order they finished.
 */
export async function inLanes<T>(
  total: number,
  concurrency: number,
  fn: () => Promise<T>,
): Promise<T[]> {
  const results: T[] = [];
  let next = 0;
  const lane = async () => {
    while (next < total) {
      next++;
      results.push(await fn());
    }
  };
  await Promise.all(Array.from({ length: concurrency }, lane));
  return results;
}

/**
 * The nearest-rank percentile: the smallest sample with at least `p`% of the
 * samples at or below it (`p = 100` is the maximum).
 *
 * @param values The samples, in any order (not changed).
 * @param p The percentile, 0 to 100.
 * @returns That sample.
 */
export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

/**
 * Registers the last bench of a file: not a measurement, it runs `fn` once
 * (logging the summary, shutting servers down) however often `Deno.bench`
 * calls it.
 *
 * @param fn The summary and shutdown.
 */
export function benchSummaryAndShutdown(fn: () => Promise<void>): void {
  let finished = false;
  Deno.bench({
    name: "summary and shutdown (not a measurement)",
    group: "teardown",
    n: 1,
    warmup: 0,
    async fn() {
      if (finished) return;
      finished = true;
      await fn();
    },
  });
}
