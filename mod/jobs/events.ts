/**
 * In-process delivery of job events to subscribers. Both stores use it for
 * the subscribers in this process; a store shared by several processes adds
 * a cross-process channel (PostgreSQL NOTIFY) in front of it.
 *
 * @module
 */

import { log } from "../log/mod.ts";
import type { JobEvent } from "./types.ts";

/** Subscribers by job id. */
export class JobEvents {
  #listeners = new Map<string, Set<(event: JobEvent) => void>>();

  /** Adds a listener for job `id`; returns the function that removes it. */
  subscribe(id: string, listener: (event: JobEvent) => void): () => void {
    let set = this.#listeners.get(id);
    if (!set) this.#listeners.set(id, set = new Set());
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.#listeners.get(id) === set) this.#listeners.delete(id);
    };
  }

  /** Delivers `event` to job `id`'s listeners; a throwing listener does not stop the others. */
  emit(id: string, event: JobEvent): void {
    const set = this.#listeners.get(id);
    if (!set) return;
    for (const listener of [...set]) {
      try {
        listener(event);
      } catch (error) {
        log("warn", "jobs", "a job event listener failed", { error: String(error) });
      }
    }
  }

  /** Jobs with at least one listener (for tests). */
  get size(): number {
    return this.#listeners.size;
  }
}
