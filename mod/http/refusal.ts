/**
 * How the connection guard answers a connection it will not serve, so that
 * the client reads the answer (a status, `retry-after`, a JSON-RPC error
 * naming the limit) instead of a network error, and so that answering a
 * flood costs little more than closing it would.
 *
 * Closing a TCP connection right after accepting it loses the answer in two
 * ways: an HTTP client that has not written its request yet takes bytes
 * arriving on an idle connection as a protocol error (Deno's `fetch`, on
 * hyper: "received unexpected message from connection"), and a close with
 * unread request bytes in the receive buffer is a reset (RFC 1122
 * §4.2.2.13; Linux `tcp_close`), after which the client's stack may drop
 * the answer it had not read yet. So an answer here:
 *
 * 1. waits for the end of the request head (scanned, not parsed; at most
 *    {@link MAX_HEAD_BYTES} and the header deadline, as an admitted
 *    connection would), unless the caller read it already or is refusing
 *    the client for being slow with it;
 * 2. writes the whole response, then shuts down its write side (a FIN after
 *    the last byte);
 * 3. reads and discards what the client still sends until it closes, at
 *    most {@link LINGER_MS} and {@link DRAIN_BYTES}, then closes.
 *
 * The work is bounded per answer (one 4 KiB buffer, one timer, a response
 * of a few hundred bytes) and in number: at most `capacity` answers are in
 * progress at once (the guard uses `max_connections`). When the desk is
 * full, the oldest answer still waiting for its head is closed unanswered
 * to make room, so connections that send nothing cannot keep the answers
 * of the ones that do from being written; when every answer in progress is
 * already written and lingering, the new refusal is closed unanswered, as
 * every refusal was before. {@link RefusalDesk.stats} counts both.
 *
 * @module
 */

import { log } from "../log/mod.ts";

/** Largest request head accepted (request line and headers). */
export const MAX_HEAD_BYTES = 64 * 1024;

/** Longest an answer waits, after its last byte, for the client to close. */
export const LINGER_MS = 1000;

/** Most bytes an answer reads and discards after the head before it closes. */
export const DRAIN_BYTES = 1024 * 1024;

const encoder = new TextEncoder();
const LF = 0x0a;
const CR = 0x0d;

/** The setting a refusal is about, told to the client in `error.data`. */
export interface RefusedLimit {
  /** The setting's name in `config.toml`, e.g. `server.max_connections_per_client`. */
  setting: string;
  /** Its value in this server. */
  value: number;
}

/** What {@link refusalResponse} writes. */
export interface Refusal {
  /** HTTP status. */
  status: 400 | 408 | 429 | 431 | 503;
  /** The JSON-RPC error's message: what was refused and what to do. */
  message: string;
  /** The limit that refused, when one did (named in `error.data`). */
  limit?: RefusedLimit;
  /** Seconds to wait before retrying, sent as `retry-after` and in `error.data`. */
  retryAfterSeconds?: number;
}

const REASONS: Record<Refusal["status"], string> = {
  400: "Bad Request",
  408: "Request Timeout",
  429: "Too Many Requests",
  431: "Request Header Fields Too Large",
  503: "Service Unavailable",
};

/**
 * A complete raw HTTP/1.1 response carrying a JSON-RPC error (code -32000,
 * id null): `error.data` holds `limit`, `value` and `retry_after_seconds`
 * where they apply, for clients that act on them without parsing text.
 */
export function refusalResponse(refusal: Refusal): Uint8Array {
  const data: Record<string, unknown> = {};
  if (refusal.limit) {
    data.limit = refusal.limit.setting;
    data.value = refusal.limit.value;
  }
  if (refusal.retryAfterSeconds !== undefined) {
    data.retry_after_seconds = refusal.retryAfterSeconds;
  }
  const error = Object.keys(data).length
    ? { code: -32000, message: refusal.message, data }
    : { code: -32000, message: refusal.message };
  const body = JSON.stringify({ jsonrpc: "2.0", error, id: null });
  const retry = refusal.retryAfterSeconds === undefined
    ? ""
    : `retry-after: ${refusal.retryAfterSeconds}\r\n`;
  return encoder.encode(
    `HTTP/1.1 ${refusal.status} ${REASONS[refusal.status]}\r\n` +
      `content-type: application/json\r\ncontent-length: ${encoder.encode(body).length}\r\n` +
      `connection: close\r\n${retry}\r\n${body}`,
  );
}

/**
 * Where the end of a request head is in `bytes` (the index after its empty
 * line, and where that empty line starts), scanning from `from`; null when
 * it is not there yet. Both CRLF and bare LF line ends count.
 */
export function findHeadEnd(
  bytes: Uint8Array,
  from: number,
): { end: number; blank: number } | null {
  let i = bytes.indexOf(LF, from);
  while (i !== -1) {
    if (bytes[i + 1] === LF) return { end: i + 2, blank: i + 1 };
    if (bytes[i + 1] === CR && bytes[i + 2] === LF) return { end: i + 3, blank: i + 1 };
    i = bytes.indexOf(LF, i + 1);
  }
  return null;
}

/** Writes all of `bytes`. */
export async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
  let written = 0;
  while (written < bytes.length) written += await conn.write(bytes.subarray(written));
}

/** Logs a refusal once, then at most every 10 s per reason with how many were left out. */
export class RefusalLog {
  readonly #last = new Map<string, { at: number; suppressed: number }>();

  /** Notes one refusal for `reason`; logs it unless one was logged in the last 10 s. */
  note(reason: string, fields: Record<string, unknown>): void {
    const now = Date.now();
    const seen = this.#last.get(reason);
    if (seen && now - seen.at < 10_000) {
      seen.suppressed++;
      return;
    }
    this.#last.set(reason, { at: now, suppressed: 0 });
    log("warn", "http", `connection refused: ${reason}`, {
      ...fields,
      ...(seen ? { alsoRefusedSincePreviousLine: seen.suppressed } : {}),
    });
  }
}

/** Counts of {@link RefusalDesk}, since it started. */
export interface RefusalStats {
  /** Refusals whose answer was written whole. */
  answered: number;
  /**
   * Refusals closed unanswered: the desk was full with answers already
   * written and lingering, or this one was the oldest still waiting for its
   * head when the desk was full and another refusal came.
   */
  unanswered: number;
  /** Refusals whose answer could not be written (the client had gone). */
  failed: number;
  /** Answers in progress now. */
  inProgress: number;
}

/** How an answer treats the request head (see {@link RefusalDesk.answer}). */
export interface AnswerOptions {
  /**
   * How long to wait for the end of the request head before answering; 0
   * answers at once (the head was read, or the client is refused for being
   * slow with it).
   */
  waitForHeadMs: number;
  /** Head bytes the caller read already; the end is looked for from there. */
  before?: Uint8Array;
}

/** Hands an answer bytes of the request that the caller's own pending read returned. */
export type LateBytes = (bytes: Uint8Array) => void;

/**
 * Finds the end of a request head in bytes that arrive in pieces, keeping
 * only the last 3 (an empty line may be split across reads).
 */
class HeadScan {
  #tail = new Uint8Array(0);
  #seen = 0;
  #ended = false;
  #resolve!: (value: null) => void;
  /** Resolves (to null) once the head has ended, or is over {@link MAX_HEAD_BYTES}. */
  readonly ended = new Promise<null>((resolve) => this.#resolve = resolve);

  /** Scans `bytes`; returns whether the head has ended. */
  push(bytes: Uint8Array): boolean {
    if (this.#ended) return true;
    const chunk = new Uint8Array(this.#tail.length + bytes.length);
    chunk.set(this.#tail, 0);
    chunk.set(bytes, this.#tail.length);
    this.#seen += bytes.length;
    if (findHeadEnd(chunk, 0) !== null || this.#seen > MAX_HEAD_BYTES) {
      this.#ended = true;
      this.#resolve(null);
      return true;
    }
    this.#tail = chunk.slice(Math.max(0, chunk.length - 3));
    return false;
  }

  /** Whether the head has ended. */
  get done(): boolean {
    return this.#ended;
  }
}

interface Answer {
  conn: Deno.Conn;
  /** Closed by the desk before its answer was written (evicted, or the desk closed). */
  dropped: boolean;
  done: Promise<void>;
}

/** Options of {@link RefusalDesk}. */
export interface RefusalDeskOptions {
  /** Most answers in progress at once. */
  capacity: number;
  /** Longest an answer waits for the client to close after its last byte (default {@link LINGER_MS}). */
  lingerMs?: number;
  /** Called for each refusal closed unanswered (to log it, rate-limited). */
  onUnanswered?: () => void;
}

/** Answers refused connections; see the module documentation. */
export class RefusalDesk {
  readonly #capacity: number;
  readonly #lingerMs: number;
  readonly #onUnanswered: () => void;
  readonly #open = new Set<Answer>();
  /** Answers still waiting for their request head, oldest first. */
  readonly #waiting = new Set<Answer>();
  readonly #stats = { answered: 0, unanswered: 0, failed: 0 };
  #closed = false;

  /** A desk answering at most `capacity` refusals at once. */
  constructor(options: RefusalDeskOptions) {
    this.#capacity = Math.max(0, Math.floor(options.capacity));
    this.#lingerMs = options.lingerMs ?? LINGER_MS;
    this.#onUnanswered = options.onUnanswered ?? (() => {});
  }

  /** See {@link RefusalStats}. */
  get stats(): RefusalStats {
    return { ...this.#stats, inProgress: this.#open.size };
  }

  /**
   * Answers `conn` with `response` and closes it, owning it from now on.
   * When `capacity` answers are in progress, the oldest one still waiting
   * for its head is closed unanswered to make room, as a full
   * `max_pending_heads` does (a client that sends its head at once is not
   * kept out by ones that send nothing); when none waits, `conn` itself is
   * closed unanswered. Returns null then, else where to hand bytes that a
   * read the caller still has pending on `conn` returns (they may end the
   * head).
   */
  answer(conn: Deno.Conn, response: Uint8Array, options: AnswerOptions): LateBytes | null {
    if (!this.#closed && this.#open.size >= this.#capacity) {
      const oldest = this.#waiting.values().next().value;
      if (oldest) this.#drop(oldest);
    }
    if (this.#closed || this.#open.size >= this.#capacity) {
      this.#stats.unanswered++;
      if (!this.#closed) this.#onUnanswered();
      close(conn);
      return null;
    }
    const answer: Answer = { conn, dropped: false, done: Promise.resolve() };
    const scan = new HeadScan();
    if (options.before) scan.push(options.before);
    this.#open.add(answer);
    answer.done = this.#run(answer, response, options.waitForHeadMs, scan)
      .catch(() => {})
      .finally(() => {
        this.#open.delete(answer);
        this.#waiting.delete(answer);
        close(conn);
      });
    return (bytes) => scan.push(bytes);
  }

  /** Resolves when the answers in progress now have ended. */
  async idle(): Promise<void> {
    await Promise.allSettled([...this.#open].map((a) => a.done));
  }

  /** Closes every connection still being answered; later refusals are closed at once. */
  close(): void {
    this.#closed = true;
    for (const answer of [...this.#open]) this.#drop(answer);
  }

  /** Closes `answer`'s connection now and forgets it. */
  #drop(answer: Answer): void {
    if (this.#waiting.delete(answer)) {
      answer.dropped = true;
      this.#stats.unanswered++;
      if (!this.#closed) this.#onUnanswered();
    }
    this.#open.delete(answer);
    close(answer.conn);
  }

  async #run(answer: Answer, response: Uint8Array, waitMs: number, scan: HeadScan) {
    const conn = answer.conn;
    const buffer = new Uint8Array(4096);
    let timer: ReturnType<typeof setTimeout> | undefined;
    let expired = false;
    const deadline = (ms: number) => {
      clearTimeout(timer);
      expired = false;
      return new Promise<null>((resolve) =>
        timer = setTimeout(() => {
          expired = true;
          resolve(null);
        }, ms)
      );
    };
    try {
      if (waitMs > 0 && !scan.done) {
        this.#waiting.add(answer);
        const ends = deadline(waitMs);
        while (!scan.done && !expired) {
          const n = await Promise.race([conn.read(buffer), ends, scan.ended]).catch(() => null);
          if (n === null) break; // the deadline, the head (read by the caller), a close or reset
          scan.push(buffer.subarray(0, n));
        }
        this.#waiting.delete(answer);
        if (answer.dropped) return;
      }
      try {
        await writeAll(conn, response);
        this.#stats.answered++;
      } catch {
        if (!answer.dropped) this.#stats.failed++;
        return;
      }
      await conn.closeWrite().catch(() => {});
      // Until the client closes: a close with its bytes unread would be a reset.
      const ends = deadline(this.#lingerMs);
      let drained = 0;
      while (!expired && drained <= DRAIN_BYTES) {
        const n = await Promise.race([conn.read(buffer), ends]).catch(() => null);
        if (n === null) break;
        drained += n;
      }
    } finally {
      clearTimeout(timer);
    }
  }
}

function close(conn: Deno.Conn): void {
  try {
    conn.close();
  } catch { /* already closed */ }
}
