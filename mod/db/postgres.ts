/**
 * The only module that imports postgres.js. It turns a DSN (or, for the
 * embedded database, a socket factory) into a {@link Database}: plain SQL
 * with `$n` parameters, a bounded wait per query, transactions, and errors
 * whose text never carries the DSN password.
 *
 * @module
 */

import postgres from "postgres";
import { Socket } from "node:net";
import {
  type Database,
  DatabaseError,
  type Listening,
  type Queryable,
  type QueryOptions,
  type Row,
  type SqlParam,
  type TransactionOptions,
} from "./database.ts";
import { hidePaths, scrubSecrets } from "./redact.ts";

/** How to reach the server: a DSN, or a function that opens a connected socket. */
export type PostgresTarget =
  | { url: string }
  | { socket: () => Promise<Socket>; user: string; database: string; password: string };

/** Options for {@link connectPostgres}. */
export interface PostgresOptions {
  /** Where to connect. */
  target: PostgresTarget;
  /** Redacted description of the target for logs and {@link Database.target}. */
  description: string;
  /** Which kind of database this is. */
  kind: Database["kind"];
  /** Pool size (default 4: the server's queries are short key lookups). */
  maxConnections?: number;
  /** Seconds to wait for a new connection (default 10). */
  connectTimeoutSeconds?: number;
  /** Default bound in ms on each statement (client wait, `statement_timeout`, `lock_timeout`). */
  queryTimeoutMs?: number;
  /** Secrets that must never appear in error messages (the DSN password). */
  secrets?: readonly (string | undefined)[];
  /**
   * The server's own absolute paths, each with the label error messages use
   * instead (asked on every error: some are known only once the database
   * runs). Any other absolute path in a message becomes `…`: these messages
   * reach clients (a tool's error text), and the log keeps {@link Database.target}.
   */
  paths?: () => readonly (readonly [string, string])[];
  /**
   * `application_name` of every connection (default `generate-image-sd15-mcp`);
   * a replica puts its worker name here so others can see it is alive.
   */
  applicationName?: string;
  /** Runs after the pool has ended (stops the embedded server). */
  onClose?: () => Promise<void>;
}

/** postgres.js connection error codes: the server could not be reached or went away. */
const CONNECTION_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EPIPE",
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
  "CONNECT_TIMEOUT",
  "EMBEDDED_UNAVAILABLE",
]);

/**
 * True for errors that mean "no usable database" rather than "bad SQL":
 * connection codes, SQLSTATE class 08 (connection exception), 28 (invalid
 * authorization), 53 (insufficient resources) and 57P01–57P03 (shutdown /
 * cannot connect now). Source: PostgreSQL docs, Appendix A "Error Codes".
 */
function isUnavailable(code: string): boolean {
  return CONNECTION_CODES.has(code) || /^(08|28|53)/.test(code) || /^57P0[123]$/.test(code);
}

/**
 * postgres.js 3.4.9 throws from a timer when a connection drops inside a
 * transaction: `begin` sends ROLLBACK on the closed connection and
 * connection.js `nextWrite` reads `socket.write` of a null socket
 * ("Cannot read properties of null (reading 'write')"). Nothing can catch
 * it, and an uncaught error ends the process, so a database restart would
 * take every replica down. The transaction itself has already failed with
 * CONNECTION_CLOSED and the server rolls it back; this stray error alone is
 * dropped. (`sql.reserve`, the alternative to `begin`, never resolves with
 * `fetch_types: false` in 3.4.9.)
 */
function ignoreClosedSocketWrites(): void {
  if (closedSocketGuard) return;
  closedSocketGuard = true;
  globalThis.addEventListener("error", (event) => {
    const error = event.error as Error | undefined;
    if (
      error instanceof TypeError && /reading 'write'/.test(error.message) &&
      /postgres[\\/]src[\\/]connection\.js/.test(error.stack ?? "")
    ) {
      event.preventDefault();
    }
  });
}
let closedSocketGuard = false;

/**
 * Connects a postgres.js pool (lazily: the first query opens the first
 * connection) and wraps it as a {@link Database}.
 */
export function connectPostgres(options: PostgresOptions): Database {
  ignoreClosedSocketWrites();
  const secrets = options.secrets ?? [];
  const common = {
    max: options.maxConnections ?? 4,
    connect_timeout: options.connectTimeoutSeconds ?? 10,
    // Idle connections are dropped after a minute so a restarted server is
    // picked up by fresh connections rather than stale ones.
    idle_timeout: 60,
    // Reconnect pause after failed attempts: postgres.js's default grows to
    // 20 s (3^n / 100), which would keep answering 503 long after the
    // database is back; this grows from 0.1 s to at most 2 s.
    backoff: (attempts: number) => Math.min(0.1 * 2 ** attempts, 2),
    // postgres.js prints notices with console.log by default; stdout is the
    // MCP protocol in stdio mode, so notices are dropped.
    onnotice: () => {},
    // Array-type discovery costs a round trip per connection and nothing here needs it.
    fetch_types: false,
    connection: {
      application_name: options.applicationName ?? "generate-image-sd15-mcp",
      // The server cancels a statement (or a lock wait) the client has stopped waiting for.
      ...(options.queryTimeoutMs === undefined ? {} : {
        statement_timeout: options.queryTimeoutMs,
        lock_timeout: options.queryTimeoutMs,
        idle_in_transaction_session_timeout: options.queryTimeoutMs,
      }),
    },
  };
  const sql = "url" in options.target
    ? postgres(options.target.url, common)
    : postgres(socketOptions(common, options.target));

  const hide = (text: string) => hidePaths(text, options.paths?.() ?? []);
  const wrap = (error: unknown): DatabaseError => {
    if (error instanceof DatabaseError) {
      // Made here or by the embedded server's socket factory (which may name its files).
      const text = hide(error.message);
      return text === error.message
        ? error
        : new DatabaseError(text, error.code, error.unavailable, error.settled);
    }
    const raw = error as { code?: unknown; message?: unknown } | undefined;
    const code = typeof raw?.code === "string" ? raw.code : "UNKNOWN";
    const unavailable = isUnavailable(code);
    const text = scrubSecrets(String(raw?.message ?? error), secrets);
    const what = unavailable ? "database unavailable" : "database error";
    return new DatabaseError(hide(`${what} (${options.description}): ${text}`), code, unavailable);
  };

  const run = async <T extends Row>(
    executor: { unsafe: typeof sql.unsafe },
    text: string,
    params: readonly SqlParam[],
    queryOptions: QueryOptions,
  ): Promise<T[]> => {
    // postgres.js queries start when awaited; `.then` starts this one.
    const pending: Promise<T[]> = executor.unsafe(
      text,
      params as unknown as Parameters<typeof sql.unsafe>[1],
      queryOptions.prepare ? { prepare: true } : undefined,
    ).then((rows) => Array.from(rows) as unknown as T[]);
    const timeoutMs = queryOptions.timeoutMs ?? options.queryTimeoutMs;
    if (timeoutMs === undefined) {
      try {
        return await pending;
      } catch (error) {
        throw wrap(error);
      }
    }
    try {
      return await bounded(pending, timeoutMs);
    } catch (error) {
      throw wrap(error);
    }
  };

  /**
   * Waits for `pending` at most `timeoutMs`. An abandoned statement is not
   * cancelled (postgres.js's cancel() opens a connection of its own, which a
   * stalled server does not answer either, and can itself reject unhandled):
   * it may still run, and the error's `settled` says when it no longer can.
   * Its eventual rejection is expected and must not surface as an unhandled
   * one (which would end the process).
   */
  const bounded = async <T>(pending: Promise<T>, timeoutMs: number): Promise<T> => {
    const settled = pending.then(() => {}, () => {});
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new DatabaseError(
              `database unavailable (${options.description}): no answer within ${timeoutMs} ms`,
              "TIMEOUT",
              true,
              settled,
            ),
          ),
        timeoutMs,
      );
    });
    try {
      return await Promise.race([pending, timeout]);
    } finally {
      clearTimeout(timer);
    }
  };

  const listener = new Listener(
    (onnotify, onclose) => {
      // A connection of its own that never idles out: LISTEN lasts as long as it.
      const dedicated = { ...common, max: 1, idle_timeout: 0, max_lifetime: 0, onnotify, onclose };
      return "url" in options.target
        ? postgres(options.target.url, dedicated)
        : postgres(socketOptions(dedicated, options.target));
    },
    wrap,
    // A LISTEN sent to a stalled server must not hold up its caller for good either.
    (pending) =>
      options.queryTimeoutMs === undefined ? pending : bounded(pending, options.queryTimeoutMs),
  );
  let closing: Promise<void> | undefined;
  return {
    target: options.description,
    kind: options.kind,
    query<T extends Row = Row>(
      text: string,
      params: readonly SqlParam[] = [],
      queryOptions: QueryOptions = {},
    ) {
      return run<T>(sql, text, params, queryOptions);
    },
    async transaction<T>(
      fn: (tx: Queryable) => Promise<T>,
      txOptions: TransactionOptions = {},
    ): Promise<T> {
      const pending = sql.begin(async (tx) => {
        const queryable: Queryable = {
          query: <R extends Row = Row>(
            text: string,
            params: readonly SqlParam[] = [],
            queryOptions: QueryOptions = {},
          ) => run<R>(tx, text, params, queryOptions),
        };
        return await fn(queryable);
      }) as Promise<T>;
      // Bounded as a whole: postgres.js sends ROLLBACK after a failed statement and waits
      // for its answer, which a stalled server never gives until it resumes.
      const timeoutMs = txOptions.timeoutMs ?? options.queryTimeoutMs;
      try {
        return timeoutMs === undefined ? await pending : await bounded(pending, timeoutMs);
      } catch (error) {
        // Errors thrown by `fn` itself (not database errors) pass through unchanged.
        if (error instanceof DatabaseError || !(error instanceof Error) || "code" in error) {
          throw wrap(error);
        }
        throw error;
      }
    },
    ...(options.kind === "server"
      ? { listen: (channel, onNotify) => listener.listen(channel, onNotify) }
      : {}),
    close() {
      closing ??= (async () => {
        try {
          // Bounded: postgres.js 3.4.9 can leave a connection that lost its socket
          // mid-query marked busy (connection.js closed() rejects the query but keeps
          // it set), and end() would then wait for it forever; after the timeout
          // end() destroys what is left.
          await Promise.all([sql.end({ timeout: 2 }), listener.end()]);
        } finally {
          await options.onClose?.();
        }
      })();
      return closing;
    },
  };
}

/**
 * Options for a pool whose connections come from a socket factory.
 * postgres.js supports `socket` (src/connection.js `createSocket`: "options.socket
 * ? await options.socket(options)") but its type declarations omit it, so the
 * object is built here and passed without an excess-property check.
 */
function socketOptions<T extends object>(
  common: T,
  target: { socket: () => Promise<Socket>; user: string; database: string; password: string },
): T & { user: string; database: string; password: string } {
  const options = {
    ...common,
    user: target.user,
    database: target.database,
    password: target.password,
    socket: () => failingAsSocket(target.socket),
  };
  return options;
}

/**
 * Turns a rejected socket factory into a socket that fails. postgres.js
 * 3.4.9 (src/connection.js `createSocket`) catches a rejection but leaves the
 * connection in its "connecting" queue for good, so queries pile up behind
 * it and never settle; a socket destroyed with the error goes through its
 * ordinary error-and-close path instead, which fails the query and frees the
 * connection for the next attempt.
 */
async function failingAsSocket(open: () => Promise<Socket>): Promise<Socket> {
  try {
    return await open();
  } catch (error) {
    const socket = new Socket();
    // Writes before the failure (the startup message) are dropped: writing to
    // a never-connected socket would fail with a vaguer "Socket is closed".
    socket.write = (() => true) as typeof socket.write;
    // After postgres.js has attached its listeners (it does so once this resolves).
    setTimeout(() => socket.destroy(error as Error), 0);
    return socket;
  }
}

type Sql = ReturnType<typeof postgres>;

/**
 * LISTEN on a dedicated connection, re-LISTENed after it drops. Not
 * postgres.js's own `sql.listen`: that one re-runs LISTEN from inside the
 * connection's close handler, before the connection has a socket again, and
 * 3.4.9 then throws "Cannot read properties of null (reading 'write')" from
 * a timer (connection.js nextWrite) — an uncaught error that ends the process
 * when the database restarts. Here the LISTEN is re-sent a second later, as
 * an ordinary query that opens a fresh connection, and retried until it holds.
 */
class Listener {
  readonly #open: (
    onnotify: (channel: string, payload: string) => void,
    onclose: () => void,
  ) => Sql;
  readonly #wrap: (error: unknown) => DatabaseError;
  readonly #bound: <T>(pending: Promise<T>) => Promise<T>;
  #sql: Sql | null = null;
  readonly #channels = new Map<string, Set<(payload: string) => void>>();
  #retry: ReturnType<typeof setTimeout> | undefined;
  #ended = false;

  constructor(
    open: (onnotify: (channel: string, payload: string) => void, onclose: () => void) => Sql,
    wrap: (error: unknown) => DatabaseError,
    bound: <T>(pending: Promise<T>) => Promise<T>,
  ) {
    this.#open = open;
    this.#wrap = wrap;
    this.#bound = bound;
  }

  #connection(): Sql {
    this.#sql ??= this.#open(
      (channel, payload) => {
        for (const fn of [...(this.#channels.get(channel) ?? [])]) fn(payload);
      },
      () => this.#scheduleRelisten(1000),
    );
    return this.#sql;
  }

  static #statement(verb: "LISTEN" | "UNLISTEN", channel: string): string {
    return `${verb} "${channel.replaceAll('"', '""')}"`;
  }

  #scheduleRelisten(delayMs: number): void {
    if (this.#ended || this.#retry !== undefined || this.#channels.size === 0) return;
    this.#retry = setTimeout(async () => {
      this.#retry = undefined;
      try {
        for (const channel of this.#channels.keys()) {
          await this.#connection().unsafe(Listener.#statement("LISTEN", channel));
        }
      } catch {
        this.#scheduleRelisten(Math.min(delayMs * 2, 5000));
      }
    }, delayMs);
  }

  async listen(channel: string, onNotify: (payload: string) => void): Promise<Listening> {
    let set = this.#channels.get(channel);
    const first = !set;
    if (!set) this.#channels.set(channel, set = new Set());
    set.add(onNotify);
    if (first) {
      try {
        await this.#bound(
          this.#connection().unsafe(Listener.#statement("LISTEN", channel)).then(() => {}),
        );
      } catch (error) {
        set.delete(onNotify);
        if (set.size === 0) this.#channels.delete(channel);
        throw this.#wrap(error);
      }
    }
    return {
      unlisten: async () => {
        set.delete(onNotify);
        if (set.size > 0 || this.#channels.get(channel) !== set) return;
        this.#channels.delete(channel);
        await this.#connection().unsafe(Listener.#statement("UNLISTEN", channel)).catch(() => {});
      },
    };
  }

  async end(): Promise<void> {
    this.#ended = true;
    clearTimeout(this.#retry);
    await this.#sql?.end({ timeout: 2 });
  }
}
