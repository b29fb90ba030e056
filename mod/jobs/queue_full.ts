/**
 * The "busy" refusals of the shared job queue, shared by both stores so that
 * the text is the same whichever one is in use.
 *
 * The queue has `queue_limit + 1` slots (the running job and `queue_limit`
 * waiting). Over HTTP each tenant (a project, and each API key) has a share
 * of it (`[generation] queue_share_per_project`, `queue_share_per_key`): a
 * job within its tenant's share takes any free slot; a job past a share
 * takes one only while the queue keeps {@link QueueShares.reserve} slots
 * free after it, room for another tenant's share. So a few tenants cannot
 * fill the queue: the last slots go to tenants within their share, and the
 * queue is truly full only when they hold them.
 *
 * Every refusal of this file is a {@link QueueFullError}: it names the
 * setting that refused, and says when to retry (`retryAfterSeconds`, added
 * by the job service from this engine's timings; the HTTP server sends it as
 * `Retry-After`).
 *
 * @module
 */

import { ToolError } from "../mcp/tool.ts";
import type { QueueCounts, QueueShares, Usage } from "./types.ts";

/** The shares of `[generation] queue_share_per_key` / `queue_share_per_project`. */
export function queueShares(perKey: number, perProject: number): QueueShares {
  // Infinity is no share (the setting 0): it reserves nothing.
  const finite = [perKey, perProject].filter(Number.isFinite);
  return { perKey, perProject, reserve: Math.max(0, ...finite) };
}

/** Slots held in the queue: the running job (one, however many engines run) and the waiting ones. */
function used(counts: QueueCounts): number {
  return Math.min(counts.running, 1) + counts.queued;
}

/**
 * Whether one more job fits: at most `limit` may wait behind the running one.
 * With several engines on one queue (replicas) `limit` counts the jobs
 * waiting in the whole queue, however many run; with one engine that is the
 * same rule as before.
 */
export function hasRoom(counts: QueueCounts, limit: number): boolean {
  return used(counts) <= limit;
}

/**
 * A refusal of the shared queue: a "busy" {@link ToolError} naming the
 * setting that refused (`limitKey`) and, once the job service has estimated
 * it, how many seconds to wait before retrying.
 */
export class QueueFullError extends ToolError {
  /** The config key that refused (`generation.queue_limit`, `generation.queue_share_per_key`, …). */
  readonly limitKey: string;
  /** Seconds until a slot should free (the HTTP `Retry-After`); null until estimated. */
  readonly retryAfterSeconds: number | null;

  /** A refusal saying `message`, by `limitKey`. */
  constructor(message: string, limitKey: string, retryAfterSeconds: number | null = null) {
    super("busy", message);
    this.limitKey = limitKey;
    this.retryAfterSeconds = retryAfterSeconds;
  }

  /** The same refusal with `seconds` to wait, said at the end of its text. */
  withRetryAfter(seconds: number): QueueFullError {
    const s = Math.max(1, Math.ceil(seconds));
    return new QueueFullError(
      `${this.message}; retry in about ${s} s (retry_after_seconds = ${s})`,
      this.limitKey,
      s,
    );
  }
}

/** The error a full queue answers with. */
export function queueFullError(counts: QueueCounts, limit: number): QueueFullError {
  return new QueueFullError(
    `the generation queue is full (${counts.running} running, ${counts.queued} waiting, ` +
      `generation.queue_limit = ${limit})`,
    "generation.queue_limit",
  );
}

/** What a tenant holds in the queue: its key's jobs and its project's (null: unbound key). */
export interface TenantHold {
  /** The key's queued + running jobs. */
  key: Usage;
  /** Its project's, or null. */
  project: Usage | null;
}

/**
 * The refusal for one more job of a tenant holding `hold`, or null when it
 * fits: the queue must have a slot, and a job past its key's or project's
 * share must leave `shares.reserve` slots free (see the module documentation).
 */
export function queueRefusal(
  counts: QueueCounts,
  limit: number,
  hold: TenantHold | null,
  shares: QueueShares | undefined,
  projectId: number | null,
): QueueFullError | null {
  if (!hasRoom(counts, limit)) return queueFullError(counts, limit);
  if (!shares || !hold) return null;
  const past = hold.key.jobs + 1 > shares.perKey
    ? {
      whose: "this API key",
      held: hold.key.jobs,
      share: shares.perKey,
      key: "generation.queue_share_per_key",
    }
    : hold.project && hold.project.jobs + 1 > shares.perProject
    ? {
      whose: `project ${projectId} (all its API keys together)`,
      held: hold.project.jobs,
      share: shares.perProject,
      key: "generation.queue_share_per_project",
    }
    : null;
  if (!past) return null;
  const slots = limit + 1;
  const freeAfter = slots - used(counts) - 1;
  if (freeAfter >= shares.reserve) return null;
  return new QueueFullError(
    `the generation queue is nearly full (${counts.running} running, ${counts.queued} waiting, ` +
      `generation.queue_limit = ${limit}) and ${past.whose} holds ${past.held} slots, at or past its ` +
      `share (${past.key} = ${past.share}); the last ${shares.reserve} slots are kept ` +
      `for callers within their share. Wait for one of yours to finish (list_generations shows ` +
      `them)`,
    past.key,
  );
}
