/**
 * Per-tenant limits of the job queue, apart from `queue_limit`: what one API
 * key, and all keys of one project, may have queued or running at once
 * (`[jobs] max_jobs_per_key`, `max_images_per_key`, `max_jobs_per_project`,
 * `max_images_per_project`). Without them one key can fill the whole queue
 * with hand-offs and hold it, renewably, while it keeps no connection open.
 * A call past a limit is refused at once, with the caller's own usage and
 * the setting to raise, before anything is decoded or queued. Shared by both
 * stores so the text is the same whichever one is in use. The refusal says
 * what must end before the same call fits ({@link QuotaError.frees}), so
 * that the job service can add when that should be (`service.ts`).
 *
 * @module
 */

import { ToolError } from "../mcp/tool.ts";
import { formatDuration } from "./estimate.ts";
import type { JobOwner, OwnerLimits, Usage } from "./types.ts";

/** What an owner and its project hold now (the project's is null for an unbound key). */
export interface OwnerUsage {
  /** The owner's queued + running jobs. */
  key: Usage;
  /** Its project's, over every key bound to it; null without a project. */
  project: Usage | null;
}

/**
 * A refusal of {@link quotaError}: a "busy" {@link ToolError} that also
 * says whose jobs hold the room and how much of it must be given back
 * before the same call fits.
 */
export class QuotaError extends ToolError {
  /** Whose limit refused: the API key's own, or its project's (every key bound to it). */
  readonly whose: "key" | "project";
  /**
   * How many of those jobs, and how many of their images, must end before
   * the same call fits; null when it never will (it asks for more images
   * than the limit allows at all).
   */
  readonly frees: { jobs: number; images: number } | null;

  /** A refusal saying `message`; see the fields. */
  constructor(
    message: string,
    whose: QuotaError["whose"],
    frees: QuotaError["frees"],
  ) {
    super("busy", message);
    this.whose = whose;
    this.frees = frees;
  }
}

const plural = (n: number, one: string) => `${n} ${one}${n === 1 ? "" : "s"}`;

function describe(usage: Usage): string {
  return `${plural(usage.jobs, "generation")} queued or running ` +
    `(${plural(usage.images, "image")})`;
}

/**
 * The refusal for a new job of `images` images by `who`, or null when it
 * fits every limit. The key's own limits are checked first: they are the
 * ones its caller can act on.
 */
export function quotaError(
  who: JobOwner,
  images: number,
  usage: OwnerUsage,
  limits: OwnerLimits,
): QuotaError | null {
  const advice = "wait for one to finish, or cancel one (list_generations shows them)";
  const check = (
    scope: QuotaError["whose"],
    whose: string,
    held: Usage,
    jobs: { limit: number; key: string },
    pictures: { limit: number; key: string },
  ): QuotaError | null => {
    if (held.jobs + 1 > jobs.limit) {
      return new QuotaError(
        `${whose} already has ${describe(held)}, the most allowed (${jobs.key} = ${jobs.limit}); ` +
          advice,
        scope,
        { jobs: held.jobs + 1 - jobs.limit, images: 0 },
      );
    }
    if (held.images + images > pictures.limit) {
      const now = held.jobs === 0 ? "" : `; it has ${describe(held)}`;
      return new QuotaError(
        images > pictures.limit
          ? `this call asks for ${
            plural(images, "image")
          }, more than ${whose} may have queued or ` +
            `running at once (${pictures.key} = ${pictures.limit}); ask for at most ${pictures.limit}`
          : `this call's ${plural(images, "image")} would bring ${whose} to ${
            held.images + images
          } images queued or running, over ${pictures.key} = ${pictures.limit}${now}; ${advice}`,
        scope,
        images > pictures.limit ? null : { jobs: 0, images: held.images + images - pictures.limit },
      );
    }
    return null;
  };
  const key = check(
    "key",
    "this API key",
    usage.key,
    { limit: limits.perKey.jobs, key: "jobs.max_jobs_per_key" },
    { limit: limits.perKey.images, key: "jobs.max_images_per_key" },
  );
  if (key || who.project === null || usage.project === null) return key;
  return check(
    "project",
    `project ${who.project} (all its API keys together)`,
    usage.project,
    { limit: limits.perProject.jobs, key: "jobs.max_jobs_per_project" },
    { limit: limits.perProject.images, key: "jobs.max_images_per_project" },
  );
}

/** A job that holds room under a limit, as {@link retryHint} sees it. */
export interface HeldJob {
  /** Its id. */
  id: string;
  /** Whether the caller's own key made it (not another key of its project). */
  own: boolean;
  /** Images it makes. */
  images: number;
  /** Running: its progress (null before its first step); queued: null. */
  progress: { step: number; steps: number } | null;
  /** Queued: its place in the queue (1 = next to start); running: null. */
  place: number | null;
  /** Estimated milliseconds until it ends, or null when this server has no estimate. */
  etaMs: number | null;
}

/**
 * When the refused call should fit again, as a sentence for the agent: the
 * jobs holding the room, in the order they should end, until enough of them
 * have (by `refusal.frees`); the time from their estimates (`lowerBound`:
 * before a whole image was measured, they cover the steps only), else
 * their place. Null when no retry helps or `held` cannot free enough (it
 * changed since the refusal).
 */
export function retryHint(
  refusal: QuotaError,
  held: readonly HeldJob[],
  lowerBound: boolean,
): string | null {
  const frees = refusal.frees;
  if (frees === null) return null;
  const timed = held.every((job) => job.etaMs !== null);
  // Without an estimate for each: running ones first, then the queue's order.
  const rank = (job: HeldJob) => job.place ?? 0;
  const ordered = [...held].sort((a, b) =>
    timed ? a.etaMs! - b.etaMs! : rank(a) - rank(b) || a.id.localeCompare(b.id)
  );
  let jobs = 0;
  let images = 0;
  let last: HeldJob | undefined;
  for (const job of ordered) {
    if (jobs >= frees.jobs && images >= frees.images) break;
    jobs++;
    images += job.images;
    last = job;
  }
  if (!last || jobs < frees.jobs || images < frees.images) return null;
  const state = last.place !== null
    ? `queued, position ${last.place} in the queue`
    : last.progress
    ? `running, step ${last.progress.step} of ${last.progress.steps}`
    : "running";
  const whose = last.own ? "" : ", made by another API key of the project";
  const which = jobs === 1
    ? `generation ${last.id} (${state}${whose}) must end first`
    : `${jobs} of them must end first, the last of those generation ${last.id} (${state}${whose})`;
  const fetch = `call get_generation with job_id "${last.id}": it waits for the job to end`;
  if (!timed || last.etaMs === null) {
    return `When to retry: ${which}; this server has not measured a step yet, so there is no ` +
      `time estimate. To retry as soon as it can fit, ${fetch}, then retry.`;
  }
  return `When to retry: ${which}, in ${lowerBound ? "at least " : ""}` +
    `${formatDuration(last.etaMs)} (estimated from this server's measured step times). ` +
    `Retry then, or ${fetch}.`;
}
