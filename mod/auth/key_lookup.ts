/**
 * The per-request key-row read, made hard to starve (a flood of wrong
 * secrets must not delay the lookups of valid keys):
 *
 * - single flight: concurrent requests for one prefix share one query
 *   (revocation is still read for every burst: a request joins only a query
 *   that is running or queued, never a finished one);
 * - a short negative cache: a prefix the database just said is unknown is
 *   answered from memory for `unknownTtlMs`;
 * - a queue instead of a fixed refusal count: at most `concurrency` queries
 *   run (the pool's size), the rest wait, each for at most `timeoutMs`
 *   in all; prefixes with a recently verified key wait in a lane of their
 *   own that is served first, so a flood of unknown prefixes delays only
 *   itself;
 * - fail closed on a stalled database: a query running longer than
 *   `timeoutMs` gives its slot up but is counted as abandoned until it
 *   settles, and while `4 × concurrency` are abandoned new lookups are
 *   refused at once instead of piling onto a pool that does not answer.
 *
 * @module
 */

import type { ApiKeyRecord } from "./key_store.ts";

/** Options for {@link KeyLookup}. */
export interface KeyLookupOptions {
  /** Reads the row; resolves null for an unknown or deleted prefix. */
  find: (prefix: string) => Promise<ApiKeyRecord | null>;
  /** Longest wait for one lookup, queueing included, in ms. */
  timeoutMs: number;
  /** How long an unknown prefix is answered from memory, in ms (0 = never). */
  unknownTtlMs: number;
  /** Queries at once (default 4, the pool size of mod/db). */
  concurrency?: number;
  /** Most lookups waiting in the ordinary lane (default 10,000); more are refused at once. */
  maxQueued?: number;
  /** Most unknown prefixes remembered (default 10,000); the oldest go first. */
  maxUnknown?: number;
  /** Clock in ms (tests). */
  now?: () => number;
}

/** What a lookup found. */
export type LookupResult =
  | { kind: "row"; row: ApiKeyRecord }
  | { kind: "unknown"; cached: boolean }
  | { kind: "timeout" }
  | { kind: "overloaded"; reason: string }
  | { kind: "error"; error: unknown };

/** One shared query, queued or running. */
interface Job {
  prefix: string;
  /** When it must have started by, else it gives up (ms, clock of the options). */
  deadline: number;
  started: boolean;
  /** Queued in the priority lane (from the start, or promoted once). */
  priority: boolean;
  resolve(row: ApiKeyRecord | null): void;
  reject(error: unknown): void;
  promise: Promise<ApiKeyRecord | null>;
}

/** Thrown to a job's waiters when it could not start before its deadline. */
const QUEUE_TIMEOUT = Symbol("queue timeout");

/** Reads key rows per the module documentation. */
export class KeyLookup {
  readonly #find: KeyLookupOptions["find"];
  readonly #timeoutMs: number;
  readonly #unknownTtlMs: number;
  readonly #concurrency: number;
  readonly #maxQueued: number;
  readonly #maxUnknown: number;
  readonly #maxAbandoned: number;
  readonly #now: () => number;
  readonly #inflight = new Map<string, Job>();
  readonly #unknown = new Map<string, number>();
  readonly #priority: Job[] = [];
  readonly #ordinary: Job[] = [];
  /** Read position in #ordinary (shifting a long array is O(n)). */
  #ordinaryHead = 0;
  #running = 0;
  #abandoned = 0;

  /** Creates an idle lookup. */
  constructor(options: KeyLookupOptions) {
    if (!(options.timeoutMs > 0)) {
      throw new Error(`database timeout must be > 0 ms, got ${options.timeoutMs}`);
    }
    this.#find = options.find;
    this.#timeoutMs = options.timeoutMs;
    this.#unknownTtlMs = options.unknownTtlMs;
    this.#concurrency = options.concurrency ?? 4;
    this.#maxQueued = options.maxQueued ?? 10_000;
    this.#maxUnknown = options.maxUnknown ?? 10_000;
    this.#maxAbandoned = 4 * this.#concurrency;
    this.#now = options.now ?? Date.now;
  }

  /** Queries running, waiting, and abandoned-but-unfinished now (tests, logs). */
  get stats(): { running: number; queued: number; abandoned: number; unknownCached: number } {
    return {
      running: this.#running,
      queued: this.#priority.length + this.#ordinary.length - this.#ordinaryHead,
      abandoned: this.#abandoned,
      unknownCached: this.#unknown.size,
    };
  }

  /**
   * The row for `prefix`. `priority` puts a new query in the lane served
   * first (the caller passes true for prefixes with a recently verified key).
   * Never rejects.
   */
  async lookup(prefix: string, priority: boolean): Promise<LookupResult> {
    const unknownUntil = this.#unknown.get(prefix);
    if (unknownUntil !== undefined) {
      if (unknownUntil > this.#now()) return { kind: "unknown", cached: true };
      this.#unknown.delete(prefix);
    }
    let job = this.#inflight.get(prefix);
    if (job && priority && !job.started && !job.priority) {
      // Promote: the job now also sits in the priority lane; whichever copy comes first runs it.
      job.priority = true;
      this.#priority.push(job);
    }
    if (!job) {
      if (this.#abandoned >= this.#maxAbandoned) {
        return {
          kind: "overloaded",
          reason: `${this.#abandoned} key lookups outlived the ${this.#timeoutMs} ms wait`,
        };
      }
      const queued = this.#ordinary.length - this.#ordinaryHead;
      if (!priority && queued >= this.#maxQueued) {
        return { kind: "overloaded", reason: `${queued} key lookups queued` };
      }
      job = this.#enqueue(prefix, priority);
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadline = new Promise<typeof QUEUE_TIMEOUT>((resolve) => {
      timer = setTimeout(() => resolve(QUEUE_TIMEOUT), this.#timeoutMs);
    });
    try {
      const row = await Promise.race([job.promise, deadline]);
      if (row === QUEUE_TIMEOUT) return { kind: "timeout" };
      return row === null ? { kind: "unknown", cached: false } : { kind: "row", row };
    } catch (error) {
      if (error === QUEUE_TIMEOUT) return { kind: "timeout" };
      return { kind: "error", error };
    } finally {
      clearTimeout(timer);
    }
  }

  #enqueue(prefix: string, priority: boolean): Job {
    let resolve!: Job["resolve"];
    let reject!: Job["reject"];
    const promise = new Promise<ApiKeyRecord | null>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    // Waiters race their own timers; a rejection nobody awaits any more must not be unhandled.
    promise.catch(() => {});
    const job: Job = {
      prefix,
      deadline: this.#now() + this.#timeoutMs,
      started: false,
      priority,
      resolve,
      reject,
      promise,
    };
    this.#inflight.set(prefix, job);
    (priority ? this.#priority : this.#ordinary).push(job);
    this.#pump();
    return job;
  }

  #next(): Job | undefined {
    while (this.#priority.length > 0) {
      const job = this.#priority.shift()!;
      if (!job.started) return job;
    }
    while (this.#ordinaryHead < this.#ordinary.length) {
      const job = this.#ordinary[this.#ordinaryHead++];
      if (this.#ordinaryHead > 1024 && this.#ordinaryHead * 2 > this.#ordinary.length) {
        this.#ordinary.splice(0, this.#ordinaryHead);
        this.#ordinaryHead = 0;
      }
      if (!job.started) return job;
    }
    return undefined;
  }

  #pump(): void {
    while (this.#running < this.#concurrency) {
      const job = this.#next();
      if (!job) return;
      job.started = true;
      if (this.#now() >= job.deadline) {
        // Every waiter has already given up (or is about to): do not spend a query on it.
        this.#finish(job);
        job.reject(QUEUE_TIMEOUT);
        continue;
      }
      this.#start(job);
    }
  }

  #start(job: Job): void {
    this.#running++;
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.#running--;
      this.#pump();
    };
    // A query slower than the whole wait frees its slot but stays counted until it settles.
    let abandoned = false;
    const timer = setTimeout(() => {
      abandoned = true;
      this.#abandoned++;
      release();
    }, this.#timeoutMs);
    let query: Promise<ApiKeyRecord | null>;
    try {
      query = this.#find(job.prefix);
    } catch (error) {
      query = Promise.reject(error);
    }
    query.then(
      (row) => {
        if (row === null) this.#rememberUnknown(job.prefix);
        else this.#unknown.delete(job.prefix);
        job.resolve(row);
      },
      (error: unknown) => job.reject(error),
    ).finally(() => {
      clearTimeout(timer);
      if (abandoned) this.#abandoned--;
      this.#finish(job);
      release();
    });
  }

  #finish(job: Job): void {
    if (this.#inflight.get(job.prefix) === job) this.#inflight.delete(job.prefix);
  }

  #rememberUnknown(prefix: string): void {
    if (this.#unknownTtlMs <= 0) return;
    this.#unknown.delete(prefix);
    this.#unknown.set(prefix, this.#now() + this.#unknownTtlMs);
    if (this.#unknown.size > this.#maxUnknown) {
      const oldest = this.#unknown.keys().next().value;
      if (oldest !== undefined) this.#unknown.delete(oldest);
    }
  }
}
