/**
 * The in-memory job store, for stdio: one process, one client, nothing to
 * share, and nothing survives the process (a stdio server lives as long as
 * its client's session).
 *
 * @module
 */

import type { ImageRequest } from "../generation/request.ts";
import { previewBytes } from "./delivery.ts";
import { JobEvents } from "./events.ts";
import { queueRefusal } from "./queue_full.ts";
import { type OwnerUsage, quotaError } from "./quota.ts";
import { trimOrder } from "./trim.ts";
import type {
  CancelResult,
  ClaimedJob,
  JobClaim,
  JobEvent,
  JobItem,
  JobOutcome,
  JobOwner,
  JobProgress,
  JobRecord,
  JobStore,
  JobSummary,
  QueueCounts,
  QueuePosition,
  StoredPreview,
  StoreLimits,
  Usage,
  WorkAhead,
} from "./types.ts";
import { canSee, expiryOf, isTerminal } from "./types.ts";

interface Entry {
  summary: JobSummary;
  request: ImageRequest | null;
  items: JobItem[];
  /** Previews made when it ended (delivery.ts). */
  previews: StoredPreview[];
  /** The token of the claim running it (see {@link JobClaim}). */
  token?: string;
}

/** Size of a content item as stored: base64 image data or UTF-16 text length. */
export function itemBytes(item: JobItem): number {
  return item.type === "image" ? item.data.length : item.text.length;
}

/** See the module documentation. */
export class MemoryJobStore implements JobStore {
  /** Always `memory`. */
  readonly kind = "memory" as const;
  #limits: StoreLimits;
  #now: () => number;
  #jobs = new Map<string, Entry>();
  #queue: string[] = [];
  #seq = 0;
  #events = new JobEvents();

  /** Creates an empty store; `now` is replaceable in tests. */
  constructor(limits: StoreLimits, now: () => number = Date.now) {
    this.#limits = limits;
    this.#now = now;
  }

  #counts(): QueueCounts {
    let running = 0;
    for (const e of this.#jobs.values()) if (e.summary.state === "running") running++;
    return { queued: this.#queue.length, running };
  }

  /** The refusal a new job of `images` images by `who` gets now, or null. */
  #refusal(who: JobOwner, images: number): Error | null {
    const limits = this.#limits.perOwner;
    let usage: OwnerUsage | null = null;
    if (limits) {
      usage = { key: { jobs: 0, images: 0 }, project: null };
      if (who.project !== null) usage.project = { jobs: 0, images: 0 };
      for (const { summary: s } of this.#jobs.values()) {
        if (isTerminal(s.state)) continue;
        const add = (u: Usage) => {
          u.jobs++;
          u.images += s.images;
        };
        if (s.owner === who.owner) add(usage.key);
        if (usage.project && s.project === who.project) add(usage.project);
      }
      const refused = quotaError(who, images, usage, limits);
      if (refused) return refused;
    }
    return queueRefusal(
      this.#counts(),
      this.#limits.queueLimit,
      usage,
      limits?.queueShares,
      who.project,
    );
  }

  /** {@inheritDoc JobStore.create} */
  create(
    job: JobOwner & { id: string; request: ImageRequest; ttlMs?: number | null },
  ): Promise<JobSummary> {
    const refused = this.#refusal(job, job.request.seeds.length);
    if (refused) return Promise.reject(refused);
    const summary: JobSummary = {
      id: job.id,
      owner: job.owner,
      project: job.project,
      tool: job.request.tool,
      state: "queued",
      images: job.request.seeds.length,
      prompt: job.request.positive,
      seq: ++this.#seq,
      createdAt: new Date(this.#now()),
      startedAt: null,
      finishedAt: null,
      expiresAt: null,
      ttlMs: job.ttlMs ?? null,
      progress: null,
      error: null,
      cancelRequested: false,
      resultBytes: 0,
    };
    this.#jobs.set(job.id, { summary, request: job.request, items: [], previews: [] });
    this.#queue.push(job.id);
    return Promise.resolve({ ...summary });
  }

  /** {@inheritDoc JobStore.assertRoom} */
  assertRoom(who: JobOwner, images: number): Promise<void> {
    const refused = this.#refusal(who, images);
    return refused ? Promise.reject(refused) : Promise.resolve();
  }

  #visible(id: string, viewer: JobOwner): Entry | null {
    const entry = this.#jobs.get(id);
    if (!entry || !canSee(entry.summary, viewer)) return null;
    const expires = entry.summary.expiresAt;
    if (expires && expires.getTime() <= this.#now()) return null;
    return entry;
  }

  /** {@inheritDoc JobStore.get} */
  get(id: string, viewer: JobOwner): Promise<JobRecord | null> {
    const entry = this.#visible(id, viewer);
    return Promise.resolve(
      entry ? { ...entry.summary, items: [...entry.items], previews: [...entry.previews] } : null,
    );
  }

  /** {@inheritDoc JobStore.summary} */
  summary(id: string, viewer: JobOwner): Promise<JobSummary | null> {
    const entry = this.#visible(id, viewer);
    return Promise.resolve(entry ? { ...entry.summary } : null);
  }

  /** {@inheritDoc JobStore.list} */
  list(viewer: JobOwner, limit: number, beforeSeq = Infinity): Promise<JobSummary[]> {
    const visible = [...this.#jobs.values()]
      .filter((e) => e.summary.seq < beforeSeq && this.#visible(e.summary.id, viewer))
      .map((e) => ({ ...e.summary }))
      .sort((a, b) => b.seq - a.seq);
    return Promise.resolve(visible.slice(0, limit));
  }

  /** {@inheritDoc JobStore.position} */
  position(seq: number): Promise<QueuePosition> {
    const work = (s: JobSummary, id?: string): WorkAhead => ({
      tool: s.tool,
      images: s.images,
      progress: s.progress ? { ...s.progress } : null,
      ...(id ? { id } : {}),
    });
    const running: WorkAhead[] = [];
    for (const { summary: s } of this.#jobs.values()) {
      if (s.state === "running") running.push(work(s, s.id));
    }
    const waiting = this.#queue.map((id) => this.#jobs.get(id)!.summary)
      .filter((s) => s.seq < seq).map((s) => work(s));
    return Promise.resolve({ running, waiting });
  }

  /** {@inheritDoc JobStore.counts} */
  counts(_timeoutMs?: number): Promise<QueueCounts> {
    return Promise.resolve(this.#counts());
  }

  /** {@inheritDoc JobStore.claim} */
  claim(worker: string): Promise<ClaimedJob | null> {
    const id = this.#queue.shift();
    if (id === undefined) return Promise.resolve(null);
    const entry = this.#jobs.get(id)!;
    entry.summary.state = "running";
    entry.summary.startedAt = new Date(this.#now());
    entry.token = crypto.randomUUID();
    this.#events.emit(id, { type: "state", state: "running" });
    return Promise.resolve({
      id,
      request: entry.request!,
      cancelRequested: entry.summary.cancelRequested,
      claim: { id, worker, token: entry.token },
    });
  }

  /** The running job `claim` holds, or undefined. */
  #held(claim: JobClaim): Entry | undefined {
    const entry = this.#jobs.get(claim.id);
    return entry && entry.summary.state === "running" && entry.token === claim.token
      ? entry
      : undefined;
  }

  /** {@inheritDoc JobStore.progress} */
  progress(claim: JobClaim, progress: JobProgress): void {
    const entry = this.#held(claim);
    if (!entry) return;
    entry.summary.progress = { ...progress };
    this.#events.emit(claim.id, { type: "progress", progress: { ...progress } });
  }

  /** {@inheritDoc JobStore.append} */
  append(claim: JobClaim, from: number, items: JobItem[]): Promise<boolean> {
    const entry = this.#held(claim);
    if (!entry) return Promise.resolve(false);
    if (from > entry.items.length) {
      return Promise.reject(
        new Error(`job ${claim.id}: items start at ${from}, but ${entry.items.length} are stored`),
      );
    }
    // Positions already stored are kept (a retried write), as in the PostgreSQL store.
    const fresh = items.slice(entry.items.length - from);
    entry.items.push(...fresh);
    entry.summary.resultBytes += fresh.reduce((n, item) => n + itemBytes(item), 0);
    return Promise.resolve(true);
  }

  /** {@inheritDoc JobStore.attachPreviews} */
  attachPreviews(claim: JobClaim, previews: StoredPreview[]): Promise<boolean> {
    const entry = this.#held(claim);
    if (!entry) return Promise.resolve(false);
    const before = entry.previews.reduce((n, p) => n + previewBytes(p), 0);
    entry.previews = [...previews];
    entry.summary.resultBytes += previews.reduce((n, p) => n + previewBytes(p), 0) - before;
    return Promise.resolve(true);
  }

  /** {@inheritDoc JobStore.finish} */
  finish(claim: JobClaim, outcome: JobOutcome): Promise<void> {
    const entry = this.#held(claim);
    if (!entry) return Promise.resolve();
    this.#end(entry, outcome.state, outcome.error);
    this.#trim();
    return Promise.resolve();
  }

  #end(entry: Entry, state: JobOutcome["state"], error: string | null): void {
    const now = this.#now();
    const i = this.#queue.indexOf(entry.summary.id);
    if (i >= 0) this.#queue.splice(i, 1);
    entry.summary.state = state;
    entry.summary.error = error;
    entry.summary.cancelRequested = false;
    entry.summary.finishedAt = new Date(now);
    entry.summary.expiresAt = new Date(
      expiryOf(
        entry.summary.createdAt.getTime(),
        now,
        entry.summary.ttlMs,
        this.#limits.resultTtlMs,
      ),
    );
    // The inputs (decoded images) are not needed any more.
    entry.request = null;
    this.#events.emit(entry.summary.id, { type: "state", state });
  }

  /** Drops finished results past the per-owner and global byte caps (see {@link trimOrder}). */
  #trim(): void {
    let unfinished = 0;
    const finished: JobSummary[] = [];
    for (const { summary: s } of this.#jobs.values()) {
      if (isTerminal(s.state)) finished.push(s);
      else unfinished += s.resultBytes;
    }
    const drop = trimOrder(finished, {
      perOwnerBytes: this.#limits.perOwner?.perKey.resultBytes ?? Infinity,
      budgetBytes: this.#limits.maxResultBytes - unfinished,
    });
    for (const id of drop) this.#jobs.delete(id);
  }

  /** {@inheritDoc JobStore.cancel} */
  cancel(id: string, owner: string): Promise<CancelResult> {
    const entry = this.#visible(id, { owner, project: null });
    if (!entry || entry.summary.owner !== owner) return Promise.resolve("unknown");
    const state = entry.summary.state;
    if (isTerminal(state)) return Promise.resolve("finished");
    if (state === "queued") {
      this.#end(entry, "cancelled", null);
      return Promise.resolve("removed");
    }
    entry.summary.cancelRequested = true;
    this.#events.emit(id, { type: "cancel" });
    return Promise.resolve("stopping");
  }

  /** {@inheritDoc JobStore.recover} */
  recover(_reason: string): Promise<string[]> {
    // Nothing survives a restart in memory.
    return Promise.resolve([]);
  }

  /** {@inheritDoc JobStore.purgeExpired} */
  purgeExpired(): Promise<number> {
    const now = this.#now();
    let n = 0;
    for (const [id, e] of this.#jobs) {
      if (e.summary.expiresAt && e.summary.expiresAt.getTime() <= now) {
        this.#jobs.delete(id);
        n++;
      }
    }
    return Promise.resolve(n);
  }

  /** {@inheritDoc JobStore.subscribe} */
  subscribe(id: string, listener: (event: JobEvent) => void): () => void {
    return this.#events.subscribe(id, listener);
  }

  /** {@inheritDoc JobStore.close} */
  close(): Promise<void> {
    return Promise.resolve();
  }
}
