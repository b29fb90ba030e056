/**
 * The channel replicas sharing one PostgreSQL talk on (docs/deploy.md): one
 * LISTEN/NOTIFY channel carries "a job was queued", job events (progress,
 * state, cancel) and cancellations of requests that arrived at another
 * replica. PostgreSQL is the only infrastructure: no coordination service.
 *
 * NOTIFY is fire-and-forget: a replica whose listening connection is down
 * misses what was sent meanwhile. Everything heard here is therefore also
 * on the job rows, and the readers of the bus poll those rows as a fallback
 * (the runner looks for queued jobs, waiters re-read their job). A ping the
 * bus sends itself tells it when its LISTEN was lost for good (postgres.js
 * re-LISTENs after a reconnect, but gives up silently when the server is
 * still down at that moment), and it listens again.
 *
 * @module
 */

import type { Database, Listening } from "../db/mod.ts";
import { log } from "../log/mod.ts";
import type { JobEvent } from "./types.ts";

/** The NOTIFY channel of every replica (one database per deployment). */
export const JOB_CHANNEL = "sd15_mcp_jobs";

/** What travels on the channel; `o` is the sending replica. */
export type BusMessage =
  | { t: "queued" }
  | { t: "event"; j: string; e: JobEvent }
  | { t: "cancel_request"; owner: string; request: string | number }
  | { t: "ping" };

/** Options of {@link JobBus}. */
export interface JobBusOptions {
  /** How often the bus pings itself, in ms (default 5000). */
  pingMs?: number;
}

/** See the module documentation. */
export class JobBus {
  readonly #db: Database & { listen: NonNullable<Database["listen"]> };
  /** This replica's name on the channel. */
  readonly origin: string;
  readonly #pingMs: number;
  readonly #listeners = new Set<(message: BusMessage) => void>();
  readonly #reconnects = new Set<() => void>();
  #listening: Listening | null = null;
  #generation = 0;
  #lastPing = 0;
  #timer: ReturnType<typeof setInterval> | undefined;
  #closed = false;
  #relistening = false;

  private constructor(
    db: Database & { listen: NonNullable<Database["listen"]> },
    origin: string,
    pingMs: number,
  ) {
    this.#db = db;
    this.origin = origin;
    this.#pingMs = pingMs;
  }

  /** A bus on `db`, or null when it cannot deliver notifications (embedded: one replica). */
  static for(db: Database, origin: string, options: JobBusOptions = {}): JobBus | null {
    if (db.kind !== "server" || !db.listen) return null;
    return new JobBus(
      db as Database & { listen: NonNullable<Database["listen"]> },
      origin,
      options.pingMs ?? 5000,
    );
  }

  /** Starts listening (rejects when the database is unreachable) and the ping watchdog. */
  async start(): Promise<void> {
    // The watchdog runs even when this first LISTEN fails: it listens again later.
    this.#timer = setInterval(() => void this.#tick(), this.#pingMs);
    await this.#listen();
    this.#lastPing = Date.now();
  }

  async #listen(): Promise<void> {
    const generation = ++this.#generation;
    const old = this.#listening;
    this.#listening = null;
    // Not awaited: on a lost connection the UNLISTEN itself waits for a reconnect.
    void old?.unlisten().catch(() => {});
    // Deliveries to an older LISTEN (postgres.js may restore it too) are dropped.
    this.#listening = await this.#db.listen(JOB_CHANNEL, (payload) => {
      if (generation === this.#generation) this.#deliver(payload);
    });
  }

  async #tick(): Promise<void> {
    if (this.#closed || this.#relistening) return;
    if (Date.now() - this.#lastPing > 3 * this.#pingMs) {
      this.#relistening = true;
      try {
        await this.#listen();
        this.#lastPing = Date.now();
        log("info", "jobs", "listening for other replicas again");
        for (const listener of this.#reconnects) listener();
      } catch (error) {
        log("debug", "jobs", "cannot listen for other replicas yet", { error: String(error) });
        return;
      } finally {
        this.#relistening = false;
      }
    }
    this.publish({ t: "ping" });
  }

  #deliver(payload: string): void {
    let message: BusMessage & { o?: string };
    try {
      message = JSON.parse(payload);
    } catch {
      return;
    }
    if (message.o === this.origin) {
      if (message.t === "ping") this.#lastPing = Date.now();
      return;
    }
    if (message.t === "ping") return;
    for (const listener of [...this.#listeners]) {
      try {
        listener(message);
      } catch (error) {
        log("warn", "jobs", "a bus listener failed", { error: String(error) });
      }
    }
  }

  /** The payload of `message` from this replica (for a `pg_notify` inside a transaction). */
  payload(message: BusMessage): string {
    return JSON.stringify({ ...message, o: this.origin });
  }

  /** Sends `message` to the other replicas (best effort: the job rows are the truth). */
  publish(message: BusMessage): void {
    if (this.#closed) return;
    this.#db.query("SELECT pg_notify($1, $2)", [JOB_CHANNEL, this.payload(message)]).catch(
      (error) => log("debug", "jobs", "notification not sent", { error: String(error) }),
    );
  }

  /** Hears messages of other replicas; returns the function that stops it. */
  on(listener: (message: BusMessage) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Runs `listener` after the bus listened again (messages may have been missed). */
  onReconnect(listener: () => void): () => void {
    this.#reconnects.add(listener);
    return () => this.#reconnects.delete(listener);
  }

  /** Stops listening and pinging. */
  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#timer);
    this.#generation++;
    await this.#listening?.unlisten().catch(() => {});
    this.#listening = null;
  }
}
