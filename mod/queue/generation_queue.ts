/**
 * One FIFO queue in front of the engine: generations run one at a time
 * (contract §2: "serialized by one lock"), a bounded number wait, and a full
 * queue answers at once instead of piling up requests that clients will time
 * out on anyway.
 *
 * @module
 */

import { ToolError } from "../mcp/tool.ts";

interface Waiter {
  start: () => void;
  fail: (error: unknown) => void;
}

/** Counts exposed on `/healthz`. */
export interface QueueStats {
  /** A job holds the single slot right now. */
  running: boolean;
  /** Jobs queued behind the running one (0 to `limit`). */
  waiting: number;
  /** Most jobs that may wait (config `[generation] queue_limit`); one more is refused. */
  limit: number;
}

/** FIFO, single-slot job queue; see the module documentation. */
export class GenerationQueue {
  #limit: number;
  #running = false;
  #waiting: Waiter[] = [];
  #idle: Array<() => void> = [];
  #closedMessage: string | null = null;

  /**
   * Creates an empty, open queue.
   *
   * @param limit how many jobs may wait behind the running one
   */
  constructor(limit: number) {
    this.#limit = limit;
  }

  /**
   * Throws the same "busy" error {@link run} would, when a new job could not
   * even wait. Lets callers refuse before expensive preparation (decoding a
   * 40-megapixel input) rather than after it.
   */
  assertRoom(): void {
    if (this.#closedMessage !== null) throw new ToolError("busy", this.#closedMessage);
    if (this.#running && this.#waiting.length >= this.#limit) throw this.#full();
  }

  #full(): ToolError {
    return new ToolError(
      "busy",
      `the generation queue is full (1 running, ${this.#waiting.length} waiting, ` +
        `generation.queue_limit = ${this.#limit}); try again in a minute`,
    );
  }

  /** Current counts. */
  stats(): QueueStats {
    return { running: this.#running, waiting: this.#waiting.length, limit: this.#limit };
  }

  /**
   * Runs `job` when its turn comes. Rejects at once with a "busy"
   * {@link ToolError} when the queue is full, and with the signal's reason when
   * aborted while waiting (the slot is freed).
   */
  async run<T>(job: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    signal?.throwIfAborted();
    if (this.#closedMessage !== null) throw new ToolError("busy", this.#closedMessage);
    if (this.#running) {
      if (this.#waiting.length >= this.#limit) throw this.#full();
      await new Promise<void>((resolve, reject) => {
        const waiter: Waiter = {
          start: () => {
            signal?.removeEventListener("abort", onAbort);
            resolve();
          },
          fail: reject,
        };
        const onAbort = () => {
          const i = this.#waiting.indexOf(waiter);
          if (i >= 0) this.#waiting.splice(i, 1);
          reject(signal!.reason);
        };
        signal?.addEventListener("abort", onAbort, { once: true });
        this.#waiting.push(waiter);
      });
    }
    this.#running = true;
    try {
      return await job();
    } finally {
      this.#next();
    }
  }

  #next(): void {
    const waiter = this.#waiting.shift();
    if (waiter) {
      waiter.start();
      return;
    }
    this.#running = false;
    for (const resolve of this.#idle.splice(0)) resolve();
  }

  /**
   * Refuses new jobs from now on with a "busy" error saying `message`; jobs
   * already running or waiting go on.
   */
  close(message: string): void {
    this.#closedMessage = message;
  }

  /** Resolves when nothing runs or waits. */
  idle(): Promise<void> {
    if (!this.#running && this.#waiting.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }
}
