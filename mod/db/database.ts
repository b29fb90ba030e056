/**
 * The database interface the rest of the program sees. Only `postgres.ts`
 * knows it is postgres.js underneath; everything else writes plain SQL with
 * `$1`-style parameters, so the same statements run against a PostgreSQL
 * server and against the embedded default.
 *
 * @module
 */

/** A value bound to a `$n` parameter. */
export type SqlParam = string | number | boolean | null | Date;

/** A result row: column name to value (int8/bigint columns arrive as strings). */
export type Row = Record<string, unknown>;

/** Per-query options. */
export interface QueryOptions {
  /**
   * Upper bound in milliseconds on how long the caller waits for the result.
   * When it passes the query is abandoned (its eventual result is dropped) and
   * the call rejects with a {@link DatabaseError} whose `code` is `TIMEOUT`.
   */
  timeoutMs?: number;
  /**
   * Keep the statement prepared on each connection (a named server-side
   * prepared statement), so a statement run on every request is parsed and
   * planned once per connection. Only for statements whose text is fixed.
   */
  prepare?: boolean;
}

/** Options of {@link Database.transaction}. */
export interface TransactionOptions {
  /**
   * Upper bound in milliseconds on the whole transaction, commit included
   * (default: the pool's statement bound). When it passes the caller stops
   * waiting and gets a {@link DatabaseError} with code `TIMEOUT`; whatever
   * the transaction had not committed is rolled back once the database
   * answers again, and {@link DatabaseError.settled} says when that is known.
   */
  timeoutMs?: number;
}

/** Something SQL can run on: the database itself or an open transaction. */
export interface Queryable {
  /** Runs one statement with `$1`… parameters and returns its rows. */
  query<T extends Row = Row>(
    text: string,
    params?: readonly SqlParam[],
    options?: QueryOptions,
  ): Promise<T[]>;
}

/** An open database: a small connection pool plus, when embedded, its server. */
export interface Database extends Queryable {
  /** Where it points, safe to log: the password is replaced by `***`. */
  readonly target: string;
  /** `server` for a `DATABASE_URL`, `embedded` for the embedded PostgreSQL default. */
  readonly kind: "server" | "embedded";
  /** Runs `fn` in one transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>, options?: TransactionOptions): Promise<T>;
  /** Closes the pool and, if this process runs the embedded server, that too. */
  close(): Promise<void>;
  /**
   * Runs `onNotify` for every NOTIFY on `channel`, received on a dedicated
   * connection that is re-established (and re-LISTENed) when it drops.
   * Notifications sent while it is down are lost, so callers keep a polling
   * fallback. Absent where the database cannot deliver them (embedded).
   */
  listen?(channel: string, onNotify: (payload: string) => void): Promise<Listening>;
}

/** A LISTEN in force; see {@link Database.listen}. */
export interface Listening {
  /** Stops listening. */
  unlisten(): Promise<void>;
}

/**
 * A failure talking to the database. The message never contains the DSN
 * password; one from a query or a transaction names no absolute path of the
 * server either (`server.data_dir` and `…` stand in), since it may reach a
 * client. `unavailable` is true when the database could not be reached or
 * did not answer in time (as opposed to an SQL error such as a constraint
 * violation).
 */
export class DatabaseError extends Error {
  /** SQLSTATE, a postgres.js connection code (e.g. `ECONNREFUSED`) or `TIMEOUT`. */
  readonly code: string;
  /** True for connection failures and timeouts. */
  readonly unavailable: boolean;
  /**
   * Resolves once the statement (or transaction) this error gave up on can
   * no longer take effect: its answer arrived late, it failed, or its
   * connection closed. Only a `TIMEOUT` leaves that open: a statement the
   * caller stopped waiting for was still sent, and a stalled database runs
   * it when it resumes. Any other error has settled already.
   */
  readonly settled: Promise<void>;

  /** Creates a database error; `message` must already be free of secrets. */
  constructor(message: string, code: string, unavailable: boolean, settled?: Promise<void>) {
    super(message);
    this.name = "DatabaseError";
    this.code = code;
    this.unavailable = unavailable;
    this.settled = settled ?? Promise.resolve();
  }
}
