/**
 * An MCP stdio transport for Deno: newline-delimited JSON-RPC on
 * stdin/stdout. The SDK's `serveStdio` drives it (the era of the
 * connection, one server instance per connection); this is the wire.
 *
 * The SDK's own `StdioServerTransport` (v2 2.4.0, as v1 before it) is
 * written against Node streams and `Buffer.concat`s every chunk onto the
 * pending message, then searches the whole buffer for a newline again:
 * quadratic in the line. Fed a line in 64 KiB chunks on a 2-core x86-64 VM
 * it took 9.0 s for 8 MB, 29 s for 16 MB and 108 s for 32 MB (this one:
 * 0.5, 0.6 and 0.7 s); two maximal images make a 72 MB line. This one keeps
 * a list of chunks and joins them once per line, caps a line at
 * {@link MAX_REQUEST_BYTES}, and answers an oversized or unparsable line
 * with a JSON-RPC error instead of closing the stream (the SDK's closes the
 * connection on a line over its 10 MB default).
 *
 * @module
 */

import { log } from "../log/mod.ts";
import { MAX_REQUEST_BYTES } from "./limits.ts";
import { checkMessage } from "./message_checks.ts";
import {
  type McpMessage,
  type McpServer,
  type McpTransport,
  parseJSONRPCMessage,
  serveStdio,
} from "./sdk.ts";
import type { ProtocolEra } from "./tasks.ts";

const NEWLINE = 0x0a;

/** Options of {@link DenoStdioTransport}. */
export interface DenoStdioOptions {
  /** Where messages come from (default: `Deno.stdin.readable`). */
  input?: ReadableStream<Uint8Array>;
  /** Where messages go (default: `Deno.stdout.writable`). */
  output?: WritableStream<Uint8Array>;
  /** Largest accepted line in bytes (default {@link MAX_REQUEST_BYTES}). */
  maxMessageBytes?: number;
}

/** Server-side stdio transport; see the module documentation. */
export class DenoStdioTransport implements McpTransport {
  /** Called when the input ends or the transport is closed. */
  onclose?: () => void;
  /** Called on a transport-level error. */
  onerror?: (error: Error) => void;
  /** Called for every parsed message. */
  onmessage?: (message: McpMessage) => void;
  /**
   * Called when stdin ends. When set, the transport stays open so running
   * requests can still answer (a piped client sends its calls and closes
   * stdin); the owner closes it when they are done. When unset, the end of
   * input closes the transport, which aborts running requests.
   */
  oninputend?: () => void;
  /**
   * Called once when writing to stdout fails (the client closed its end or
   * died): nobody will read the answers, so the owner should cancel the
   * work and exit.
   */
  onclientgone?: (reason: string) => void;

  #input: ReadableStream<Uint8Array>;
  #writer: WritableStreamDefaultWriter<Uint8Array>;
  #max: number;
  #reader?: ReadableStreamDefaultReader<Uint8Array>;
  #closed = false;
  #encoder = new TextEncoder();
  #writeChain: Promise<void> = Promise.resolve();
  /** Ids of requests received and not yet answered (nor cancelled). */
  #open = new Set<string | number>();
  #settled: Array<() => void> = [];
  #gone = false;
  #probes = 0;

  /** Creates the transport; nothing is read until {@link start}. */
  constructor(options: DenoStdioOptions = {}) {
    this.#input = options.input ?? Deno.stdin.readable;
    this.#writer = (options.output ?? Deno.stdout.writable).getWriter();
    this.#max = options.maxMessageBytes ?? MAX_REQUEST_BYTES;
  }

  /** Starts reading input in the background. */
  start(): Promise<void> {
    this.#reader = this.#input.getReader();
    this.#readLoop().catch((error) => this.onerror?.(error as Error));
    return Promise.resolve();
  }

  async #readLoop(): Promise<void> {
    const reader = this.#reader!;
    let pending: Uint8Array[] = [];
    let pendingBytes = 0;
    let discarding = false;
    try {
      while (!this.#closed) {
        const { value, done } = await reader.read();
        if (done) break;
        let start = 0;
        while (start < value.length) {
          const nl = value.indexOf(NEWLINE, start);
          const end = nl === -1 ? value.length : nl;
          const piece = value.subarray(start, end);
          if (!discarding) {
            if (pendingBytes + piece.length > this.#max) {
              discarding = true;
              pending = [];
              pendingBytes = 0;
            } else {
              // A piece kept across reads is copied: the stream may reuse its chunk.
              pending.push(nl === -1 ? piece.slice() : piece);
              pendingBytes += piece.length;
            }
          }
          if (nl === -1) break;
          if (discarding) {
            this.#reject(-32600, `message larger than ${this.#max} bytes refused`);
            discarding = false;
          } else {
            this.#dispatch(pending, pendingBytes);
          }
          pending = [];
          pendingBytes = 0;
          start = nl + 1;
        }
      }
    } finally {
      if (this.oninputend && !this.#closed) this.oninputend();
      else this.#finish();
    }
  }

  #dispatch(pieces: Uint8Array[], total: number): void {
    let bytes: Uint8Array;
    if (pieces.length === 1) bytes = pieces[0];
    else {
      bytes = new Uint8Array(total);
      let offset = 0;
      for (const p of pieces) {
        bytes.set(p, offset);
        offset += p.length;
      }
    }
    // A line of only whitespace (or a lone "\r") is skipped.
    let end = bytes.length;
    while (
      end > 0 && (bytes[end - 1] === 0x0d || bytes[end - 1] === 0x20 || bytes[end - 1] === 0x09)
    ) {
      end--;
    }
    if (end === 0) return;
    const checked = checkMessage(end === bytes.length ? bytes : bytes.subarray(0, end));
    if (!checked.ok) {
      this.#reject(checked.code, checked.error, checked.id);
      return;
    }
    const json = checked.message;
    let parsed: McpMessage;
    try {
      parsed = parseJSONRPCMessage(json);
    } catch {
      const id = (json as { id?: unknown })?.id;
      this.#reject(
        -32600,
        "invalid JSON-RPC message",
        typeof id === "string" || typeof id === "number" ? id : null,
      );
      return;
    }
    const message = parsed as { id?: string | number; method?: string; params?: unknown };
    if (
      message.method === undefined && typeof message.id === "string" &&
      message.id.startsWith("server-probe-")
    ) {
      return; // the answer to a probe(): the SDK never sent that request
    }
    if (message.method !== undefined && message.id !== undefined) this.#open.add(message.id);
    if (message.method === "notifications/cancelled") {
      // A cancelled request gets no reply (MCP cancellation), so stop waiting for one.
      const id = (message.params as { requestId?: string | number } | undefined)?.requestId;
      if (id !== undefined) this.#answered(id);
    }
    this.onmessage?.(parsed);
  }

  #answered(id: string | number): void {
    this.#open.delete(id);
    if (this.#open.size === 0) { for (const resolve of this.#settled.splice(0)) resolve(); }
  }

  /** Resolves when every request received so far has been answered or cancelled. */
  settled(): Promise<void> {
    if (this.#open.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#settled.push(resolve));
  }

  #reject(code: number, message: string, id: string | number | null = null): void {
    log("warn", "stdio", message);
    // A JSON-RPC error with id null is how the spec answers a request whose id is unknown.
    this.#write(JSON.stringify({ jsonrpc: "2.0", id, error: { code, message } }) + "\n")
      .catch((error) => this.onerror?.(error as Error));
  }

  #write(text: string): Promise<void> {
    const bytes = this.#encoder.encode(text);
    this.#writeChain = this.#writeChain.then(() => this.#writer.write(bytes)).catch((error) => {
      if (!this.#gone) {
        this.#gone = true;
        this.onclientgone?.(`writing to stdout failed: ${(error as Error)?.message ?? error}`);
      }
      throw error;
    });
    return this.#writeChain;
  }

  /** How many requests were received and not yet answered (nor cancelled). */
  get openRequests(): number {
    return this.#open.size;
  }

  /**
   * Sends a `ping` request (MCP ping: either side may send one to check the
   * connection) to find out whether anyone still reads stdout: writing to a
   * pipe whose reader is gone fails, and {@link onclientgone} is called.
   * The reply, if any, is ignored.
   */
  probe(): void {
    if (this.#closed || this.#gone) return;
    const message = { jsonrpc: "2.0", id: `server-probe-${++this.#probes}`, method: "ping" };
    this.#write(JSON.stringify(message) + "\n").catch(() => {});
  }

  /** Writes one message as a line on stdout. */
  async send(message: McpMessage): Promise<void> {
    if (this.#closed) throw new Error("stdio transport is closed");
    await this.#write(JSON.stringify(message) + "\n");
    const reply = message as { id?: string | number; method?: string };
    if (reply.method === undefined && reply.id !== undefined) this.#answered(reply.id);
  }

  #finish(): void {
    if (this.#closed) return;
    this.#closed = true;
    // A closed transport answers nothing more: stop waiting for replies.
    this.#open.clear();
    for (const resolve of this.#settled.splice(0)) resolve();
    this.onclose?.();
  }

  /** Stops reading and flushes pending writes. */
  async close(): Promise<void> {
    if (this.#closed) return;
    try {
      await this.#reader?.cancel();
    } catch { /* already closed */ }
    await this.#writeChain.catch(() => {});
    this.#finish();
  }
}

/** The SDK's hold on one stdio connection. */
export interface StdioConnection {
  /** Closes the connection's server instance and the transport. */
  close(): Promise<void>;
}

/**
 * Serves MCP over `transport` with the SDK's stdio entry: the opening
 * message decides the era (`initialize`: the 2025 era; a request with the
 * 2026-07-28 `_meta` envelope, usually `server/discover`: 2026-07-28), and
 * `build` makes the one server instance that serves the connection. Reading
 * starts at once.
 */
export function serveStdioConnection(
  build: (era: ProtocolEra) => McpServer,
  transport: McpTransport,
): StdioConnection {
  return serveStdio(({ era }) => build(era), {
    transport,
    onerror: (error) => log("debug", "stdio", "MCP message refused", { error: error.message }),
  });
}
