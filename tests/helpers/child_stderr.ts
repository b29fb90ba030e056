/**
 * Follows a spawned server's stderr: waits for a log line (the port it
 * listens on, a worker's start), then keeps reading to the end so the child
 * never blocks on a full pipe, and keeps everything for the assertions.
 *
 * @module
 */

/** A child's stderr, read as it comes. */
export interface StderrFollower {
  /** Everything read so far. */
  text(): string;
  /**
   * Reads until `pattern` matches what has been read; throws, with the
   * stderr so far, when the child exits first.
   *
   * @param pattern What to wait for, matched against the whole text read so far.
   * @param what Names the wait in the error, e.g. `"listening"`.
   * @returns The match.
   */
  waitFor(pattern: RegExp, what: string): Promise<RegExpMatchArray>;
  /**
   * Reads the rest in the background; call once, after the last
   * {@link StderrFollower.waitFor}.
   *
   * @returns Settles when the stream ends.
   */
  drain(): Promise<void>;
}

/**
 * Follows `stderr`, a spawned child's piped stderr.
 *
 * @param stderr `child.stderr` of a `Deno.Command` spawned with `stderr: "piped"`.
 */
export function followStderr(stderr: ReadableStream<Uint8Array>): StderrFollower {
  const reader = stderr.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  return {
    text: () => text,
    async waitFor(pattern, what) {
      for (;;) {
        const m = text.match(pattern);
        if (m) return m;
        const { value, done } = await reader.read();
        if (done) throw new Error(`server exited before ${what}:\n${text}`);
        text += value;
      }
    },
    async drain() {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        text += value;
      }
    },
  };
}

/** The HTTP server's start-up line; group 1 is the port. */
export const HTTP_LISTENING: RegExp = /listening on http:\/\/127\.0\.0\.1:(\d+)\/mcp/;
