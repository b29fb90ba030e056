/**
 * The content of finished jobs as the PostgreSQL store last read it for a
 * delivery, kept in this process so that a client polling a finished result
 * (`tasks/get`, `tasks/result`, `get_generation`) does not make the
 * database encode, send and this process decode up to 1 MB of base64 on
 * every poll: on a 2-core x86-64 VM that read was most of a poll's cost
 * (about 5 to 8 ms of this process's CPU, and the database server's own, for
 * a result near the inline budget).
 *
 * Only content is kept, never who may see it: every read still asks the
 * database for the job's row as the caller may see it (owner or project,
 * not expired), and only then takes the content from here. The content of
 * a finished job never changes (items and previews are written only while
 * it runs, under its claim), so an entry is right for every replica and
 * every caller that may see the job; a job deleted (expired, trimmed under
 * the result caps) reads as gone before its entry is looked at.
 *
 * The bound is fixed: {@link FINISHED_CACHE_BYTES} characters of content
 * (base64 and text, about one byte each), least recently read first out.
 *
 * @module
 */

import type { StoredPreview } from "./types.ts";
import type { JobItem } from "./types.ts";

/**
 * Most characters of content kept: 32 MiB, about 30 deliveries of results
 * at the 1 MiB a client takes (a poller repeats one result; a few dozen
 * results polled at once all stay), small beside the models' memory.
 */
export const FINISHED_CACHE_BYTES = 32 * 1024 * 1024;

/** What a delivery read of a finished job returns besides its summary. */
export interface FinishedContent {
  /** Its items, images with a stored preview for the delivery's budget left empty. */
  items: JobItem[];
  /** Its stored previews. */
  previews: StoredPreview[];
}

/** Characters `content` holds (what the bound counts). */
export function contentSize(content: FinishedContent): number {
  let n = 0;
  for (const item of content.items) n += item.type === "text" ? item.text.length : item.data.length;
  for (const preview of content.previews) n += preview.data.length;
  return n;
}

/** A bytes-bounded least-recently-read map of finished jobs' content, by job id and budget. */
export class FinishedCache {
  readonly #maxBytes: number;
  /** Insertion order is recency: a hit is deleted and set again. */
  readonly #entries = new Map<string, { content: FinishedContent; bytes: number }>();
  #bytes = 0;

  /** Keeps at most `maxBytes` characters of content. */
  constructor(maxBytes = FINISHED_CACHE_BYTES) {
    this.#maxBytes = maxBytes;
  }

  /** Characters of content now kept. */
  get bytes(): number {
    return this.#bytes;
  }

  /** Entries now kept. */
  get size(): number {
    return this.#entries.size;
  }

  static #key(id: string, budget: number): string {
    return `${id}\u0000${budget}`;
  }

  /** The content of finished job `id` read for `budget`, or undefined. */
  get(id: string, budget: number): FinishedContent | undefined {
    const key = FinishedCache.#key(id, budget);
    const entry = this.#entries.get(key);
    if (!entry) return undefined;
    this.#entries.delete(key);
    this.#entries.set(key, entry);
    return entry.content;
  }

  /** Keeps `content` of finished job `id` read for `budget` (not when larger than the bound). */
  set(id: string, budget: number, content: FinishedContent): void {
    const key = FinishedCache.#key(id, budget);
    this.#remove(key);
    const bytes = contentSize(content);
    if (bytes > this.#maxBytes) return;
    this.#entries.set(key, { content, bytes });
    this.#bytes += bytes;
    for (const [oldest] of this.#entries) {
      if (this.#bytes <= this.#maxBytes) break;
      this.#remove(oldest);
    }
  }

  /** Forgets every entry of job `id` (it is gone or no longer visible). */
  delete(id: string): void {
    const prefix = `${id}\u0000`;
    for (const key of [...this.#entries.keys()]) if (key.startsWith(prefix)) this.#remove(key);
  }

  #remove(key: string): void {
    const entry = this.#entries.get(key);
    if (!entry) return;
    this.#entries.delete(key);
    this.#bytes -= entry.bytes;
  }
}
