/**
 * Generation jobs: what a job is and the one interface both stores
 * implement (in memory for stdio, PostgreSQL for HTTP). A job is created by
 * every image-tool call, waits in the store's FIFO queue, is claimed by the
 * engine's runner, reports progress, collects its content items as images
 * finish, and keeps its result for `[jobs] result_ttl_seconds`.
 *
 * The interface is shaped for several replicas sharing one PostgreSQL
 * (docs/deploy.md): claiming is an atomic state change by a named worker, progress
 * and cancellation requests are written to the job, and the events a waiter
 * subscribes to can be delivered by NOTIFY instead of in process.
 *
 * @module
 */

import type { ImageRequest, ImageToolName, RequestProgress } from "../generation/request.ts";
import type { ImageContent, TextContent } from "../mcp/tool.ts";

/** Where a job is in its life. */
export type JobState = "queued" | "running" | "succeeded" | "failed" | "cancelled";

/** The states a job never leaves. */
export const TERMINAL_STATES: readonly JobState[] = ["succeeded", "failed", "cancelled"];

/** Whether `state` is final. */
export function isTerminal(state: JobState): boolean {
  return TERMINAL_STATES.includes(state);
}

/** One content item of a job's result, as the tool returns it. */
export type JobItem = TextContent | ImageContent;

/** Progress of a running job: the request's position plus how many images are finished. */
export interface JobProgress extends RequestProgress {
  /** Images finished so far (succeeded or failed). */
  imagesDone: number;
}

/**
 * Who made a job, or who asks about one: the owner (`key:<prefix>` over
 * HTTP, `stdio:<pid>` over stdio) and the project its API key is bound to.
 * A job is visible to its owner and, when it has a project, to every key
 * bound to that project; only its owner may cancel it.
 */
export interface JobOwner {
  /** `key:<prefix>` over HTTP, `stdio:<pid>` over stdio. */
  owner: string;
  /** The project of the owner's API key, or null (an unbound key, stdio). */
  project: number | null;
}

/** The shortest TTL a task is given, whatever its client asks: a minute. */
export const MIN_TASK_TTL_MS = 60_000;

/**
 * The TTL of a task whose client asked for `requested` ms (absent: none
 * asked): the request within [{@link MIN_TASK_TTL_MS}, `resultTtlMs`]
 * (`[jobs] result_ttl_seconds`), the longest by default. The task is kept
 * that long from its creation, and at least {@link MIN_TASK_TTL_MS} after
 * it ends (a job that waited or ran longer than its TTL is never purged as
 * it ends).
 */
export function taskTtlMs(requested: number | undefined, resultTtlMs: number): number {
  const max = Math.max(MIN_TASK_TTL_MS, resultTtlMs);
  if (requested === undefined || !Number.isFinite(requested)) return max;
  return Math.min(max, Math.max(MIN_TASK_TTL_MS, Math.round(requested)));
}

/** When a job created at `createdAt` and ending at `endedAt` expires (see {@link JobSummary.ttlMs}). */
export function expiryOf(
  createdAt: number,
  endedAt: number,
  ttlMs: number | null,
  resultTtlMs: number,
): number {
  if (ttlMs === null) return endedAt + resultTtlMs;
  return Math.max(createdAt + ttlMs, endedAt + MIN_TASK_TTL_MS);
}

/** Whether `viewer` may see (list, fetch) a job of `job`'s owner and project. */
export function canSee(job: JobOwner, viewer: JobOwner): boolean {
  return job.owner === viewer.owner || (viewer.project !== null && job.project === viewer.project);
}

/** What every read of a job returns (no request inputs, no result items). */
export interface JobSummary extends JobOwner {
  /** Unguessable, URL-safe id (`gen_` + 22 base64url characters, 128 random bits). */
  id: string;
  /** The tool that created it. */
  tool: ImageRequest["tool"];
  /** Its state. */
  state: JobState;
  /** Number of images requested. */
  images: number;
  /** The user's positive prompt (shown only to the owner). */
  prompt: string;
  /** Creation order: FIFO position in the queue. */
  seq: number;
  /** When it was created. */
  createdAt: Date;
  /** When the engine started it. */
  startedAt: Date | null;
  /** When it ended. */
  finishedAt: Date | null;
  /** When its result will be purged (set when it ends). */
  expiresAt: Date | null;
  /**
   * A task's TTL (ms from creation it is kept, {@link taskTtlMs}); null for a
   * job made by a plain call, kept `[jobs] result_ttl_seconds` after it ends.
   */
  ttlMs: number | null;
  /** Last reported progress (null before the first step). */
  progress: JobProgress | null;
  /** Why it failed or was stopped, when there is a single reason. */
  error: string | null;
  /** A cancellation was asked for and the engine has not stopped yet. */
  cancelRequested: boolean;
  /** Bytes of result content stored (base64 image data plus text). */
  resultBytes: number;
}

/** A job with its result items (in order). */
export interface JobRecord extends JobSummary {
  /** Content items so far; complete when the job is terminal. */
  items: JobItem[];
  /** The previews of its images over the inline budget, made when it ended (none before). */
  previews: StoredPreview[];
}

/**
 * One claim of a running job: the job, the worker that claimed it, and a
 * token unique to this claim. Every write of a running job carries it
 * (fencing): once the claim is no longer the row's (its lease lapsed and the
 * job was failed, or a claim whose answer was lost went back to the queue),
 * a late write changes nothing.
 */
export interface JobClaim {
  /** The job id. */
  id: string;
  /** The worker that claimed it. */
  worker: string;
  /** Unique to this claim. */
  token: string;
}

/** A job the runner has claimed: it needs the whole request. */
export interface ClaimedJob {
  /** The job id. */
  id: string;
  /** The request to run. */
  request: ImageRequest;
  /** A cancellation arrived while it was being claimed. */
  cancelRequested: boolean;
  /** The claim its writes carry. */
  claim: JobClaim;
}

/** What a subscriber hears about one job. */
export type JobEvent =
  | { type: "progress"; progress: JobProgress }
  | { type: "state"; state: JobState }
  | { type: "cancel" };

/** How a job ended, as the runner reports it. */
export interface JobOutcome {
  /** The final state. */
  state: "succeeded" | "failed" | "cancelled";
  /** A single reason (the tool error of a one-image request, or why it stopped). */
  error: string | null;
}

/** What {@link JobStore.cancel} did. */
export type CancelResult =
  | "removed" // it was queued and left the queue
  | "stopping" // it is running and stops at the next step boundary
  | "finished" // it had already ended; nothing to do
  | "unknown"; // no such job for this owner

/** Limits applied when a job is created or ends. */
export interface StoreLimits {
  /** Most jobs that may wait behind the running one (`[generation] queue_limit`). */
  queueLimit: number;
  /** How long a finished job's result is kept, in ms (`[jobs] result_ttl_seconds`). */
  resultTtlMs: number;
  /**
   * Most result bytes kept over all finished jobs (`[jobs] max_result_mib`).
   * Past it the owner holding the most loses its oldest first, so a tenant
   * that fills the store pushes out its own results, not another's.
   */
  maxResultBytes: number;
  /**
   * Per-owner limits (`[jobs] max_*_per_key`, `max_*_per_project`); absent
   * over stdio, where there is one owner. Infinity means none.
   */
  perOwner?: OwnerLimits;
}

/** What one owner, and one project, may hold (see {@link StoreLimits.perOwner}). */
export interface OwnerLimits {
  /** Queued + running jobs, and their images, of one owner. */
  perKey: { jobs: number; images: number; resultBytes: number };
  /** Queued + running jobs, and their images, of every owner of one project. */
  perProject: { jobs: number; images: number };
  /** Each tenant's share of `queue_limit` (mod/jobs/queue_full.ts); absent: none. */
  queueShares?: QueueShares;
}

/** Queued + running jobs and their images. */
export interface Usage {
  /** Jobs queued or running. */
  jobs: number;
  /** The images those jobs make. */
  images: number;
}

/** Counts for `/healthz` and the queue-full message. */
export interface QueueCounts {
  /** Jobs waiting. */
  queued: number;
  /** Jobs running. */
  running: number;
}

/** A job that is ahead of a queued one: its tool, its images, its last progress. */
export interface WorkAhead {
  /** The tool that created it. */
  tool: ImageToolName;
  /** Images it makes. */
  images: number;
  /** Last reported progress (null before its first step, and for a queued job). */
  progress: JobProgress | null;
  /** The job id (running jobs only; this process's engine may be the one running it). */
  id?: string;
}

/** Where a queued job stands: everything ahead of it in the queue. */
export interface QueuePosition {
  /** Every running job (a queued job runs after them, or beside them on another engine). */
  running: WorkAhead[];
  /** The queued jobs created before it, oldest first. */
  waiting: WorkAhead[];
}

/** How many jobs are ahead of a queued one, counting the running ones. */
export function jobsAhead(position: QueuePosition): number {
  return position.running.length + position.waiting.length;
}

/** The store of jobs; see the module documentation. */
export interface JobStore {
  /** `memory` (stdio) or `postgres` (HTTP). */
  readonly kind: "memory" | "postgres";
  /**
   * Creates a queued job. Rejects with a "busy" `ToolError` when
   * `running + queued` already exceeds the queue limit, or when the owner
   * (or its project) would go past its limits; the check and the insert are
   * one step.
   */
  create(
    job: JobOwner & { id: string; request: ImageRequest; ttlMs?: number | null },
  ): Promise<JobSummary>;
  /**
   * Throws the same "busy" error {@link create} would for a job of `images`
   * images by `who`, without creating anything.
   */
  assertRoom(who: JobOwner, images: number): Promise<void>;
  /**
   * The job with its items when `viewer` may see it ({@link canSee}), or
   * null. With `delivery`, the inline budget a result is delivered within,
   * an image item that has a stored preview for that budget may come with
   * empty `data` (delivery.ts sends the preview, never the image): a poll
   * of a large finished result does not read its full PNGs.
   */
  get(id: string, viewer: JobOwner, delivery?: { budget: number }): Promise<JobRecord | null>;
  /** The job without items when `viewer` may see it, or null. */
  summary(id: string, viewer: JobOwner): Promise<JobSummary | null>;
  /** The most recent jobs `viewer` may see, newest first; with `beforeSeq`, only older ones. */
  list(viewer: JobOwner, limit: number, beforeSeq?: number): Promise<JobSummary[]>;
  /** What is ahead of the queued job `seq`. */
  position(seq: number): Promise<QueuePosition>;
  /** Queue depth and running jobs; `timeoutMs` bounds the wait (`/healthz`). */
  counts(timeoutMs?: number): Promise<QueueCounts>;
  /**
   * Takes the oldest queued job for `worker` (state `running`), or null when
   * none waits. A claim whose answer was lost (the database stalled or went
   * away) is put back in the queue by the next call, never left `running`
   * under a claim nobody holds.
   */
  claim(worker: string): Promise<ClaimedJob | null>;
  /** Records progress of a running job (coalesced; never blocks the engine). */
  progress(claim: JobClaim, progress: JobProgress): void;
  /**
   * Stores result items of a running job at positions `from`, `from + 1`, …
   * Idempotent: a position already stored is kept as it is, so a write retried
   * after a lost commit reply does not store an image twice. Resolves false,
   * storing nothing, when `claim` no longer holds the job (its lease lapsed).
   */
  append(claim: JobClaim, from: number, items: JobItem[]): Promise<boolean>;
  /**
   * Stores the previews of a running job's images (made as it ends, before
   * {@link finish}), counted in its result bytes. Resolves false, storing
   * nothing, when `claim` no longer holds the job.
   */
  attachPreviews(claim: JobClaim, previews: StoredPreview[]): Promise<boolean>;
  /**
   * Ends a running job, sets its expiry, and trims old results to the byte
   * cap. Nothing changes when `claim` no longer holds the job; a claim whose
   * lease has lapsed ends it as `failed` with {@link LEASE_LAPSED_REASON},
   * whatever `outcome` says, as the lease sweep of any replica would.
   */
  finish(claim: JobClaim, outcome: JobOutcome): Promise<void>;
  /**
   * Cancels the job `id` of `owner` (only its owner may): a queued one leaves
   * the queue, a running one is asked to stop.
   */
  cancel(id: string, owner: string): Promise<CancelResult>;
  /**
   * At start-up: ends as `failed` with `reason` every `running` job whose
   * worker is gone (a previous run of this process, or a replica that
   * stopped), never one a live worker still runs; returns their ids.
   */
  recover(reason: string): Promise<string[]>;
  /** Deletes jobs whose results expired; returns how many. */
  purgeExpired(): Promise<number>;
  /** Listens to one job's events; returns the unsubscribe function. */
  subscribe(id: string, listener: (event: JobEvent) => void): () => void;
  /** Releases what the store holds (the database stays open: it is not the store's). */
  close(): Promise<void>;

  // Shared stores only (PostgreSQL with several replicas).

  /** Starts hearing the other replicas (jobs queued, job events, request cancellations). */
  open?(): Promise<void>;
  /** Runs `listener` when another replica queued a job (or events may have been missed). */
  onQueued?(listener: () => void): () => void;
  /**
   * Extends the lease of a running job. `held` is false when `claim` no
   * longer holds it (its lease lapsed: it was failed, or is about to be).
   */
  renew?(claim: JobClaim): Promise<LeaseRenewal>;
  /**
   * Whether a stop of the running job was asked for in the store by another
   * process (another replica, or the revocation of its API key); read by the
   * runner twice a second while the job runs.
   */
  cancelRequested?(claim: JobClaim): Promise<boolean>;
  /** Fails every running job whose lease expired, with `reason`; returns their ids. */
  expireLeases?(reason: string): Promise<string[]>;
  /** Tells the other replicas that `owner` cancelled its request `request` (not in flight here). */
  cancelRequestElsewhere?(owner: string, request: string | number): void;
  /** Runs `listener` when another replica passes on a request cancellation. */
  onRequestCancel?(listener: (owner: string, request: string | number) => void): () => void;
}

/**
 * Why a job whose lease lapsed ended as `failed`: its worker stopped (a
 * crash, a kill, a power loss), or could not reach the database for the
 * whole lease (the database stalled or went away). Either way the job is not
 * retried (docs/deploy.md, "Leases").
 */
export const LEASE_LAPSED_REASON: string =
  "the worker running it stopped renewing its lease for jobs.lease_seconds: the worker " +
  "stopped, or the database did not answer it for that long; call the tool again";

/** What {@link JobStore.renew} found. */
export interface LeaseRenewal {
  /** The job is still running under this worker's lease. */
  held: boolean;
  /** A cancellation was asked for (a fallback for a missed notification). */
  cancelRequested: boolean;
}

/**
 * The preview of one image of a result that is over the inline budget, made
 * once when its job ends (the runner, through `planPreviews` in delivery.ts) and kept
 * with the result, so a poll of a finished result encodes nothing.
 */
export interface StoredPreview {
  /** Which image of the result it stands for (1-based, in result order). */
  image: number;
  /** The inline budget it was planned for (a server started with another plans again). */
  budget: number;
  /** The preview's type. */
  mimeType: "image/jpeg" | "image/png";
  /** Preview width in pixels. */
  width: number;
  /** Preview height in pixels. */
  height: number;
  /** The preview, base64. */
  data: string;
  /** The full-size PNG it stands for: its size in pixels and bytes. */
  full: { width: number; height: number; bytes: number };
}

/** The queue shares of one store (absent over stdio: one owner; see queue_full.ts). */
export interface QueueShares {
  /** Slots one API key may hold before the reserve applies (`generation.queue_share_per_key`). */
  perKey: number;
  /** Slots one project's keys may hold together before it applies (`generation.queue_share_per_project`). */
  perProject: number;
  /**
   * Slots a job past its share must leave free: the larger share, so that one
   * more tenant can still take its whole share.
   */
  reserve: number;
}
