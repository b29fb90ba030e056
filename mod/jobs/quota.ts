/**
 * Per-tenant limits of the job queue, apart from `queue_limit`: what one API
 * key, and all keys of one project, may have queued or running at once
 * (`[jobs] max_jobs_per_key`, `max_images_per_key`, `max_jobs_per_project`,
 * `max_images_per_project`). Without them one key can fill the whole queue
 * with hand-offs and hold it, renewably, while it keeps no connection open.
 * A call past a limit is refused at once, with the caller's own usage and
 * the setting to raise, before anything is decoded or queued. Shared by both
 * stores so the text is the same whichever one is in use.
 *
 * @module
 */

import { ToolError } from "../mcp/tool.ts";
import type { JobOwner, OwnerLimits, Usage } from "./types.ts";

/** What an owner and its project hold now (the project's is null for an unbound key). */
export interface OwnerUsage {
  /** The owner's queued + running jobs. */
  key: Usage;
  /** Its project's, over every key bound to it; null without a project. */
  project: Usage | null;
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
): ToolError | null {
  const advice = "wait for one to finish, or cancel one (list_generations shows them)";
  const check = (
    whose: string,
    held: Usage,
    jobs: { limit: number; key: string },
    pictures: { limit: number; key: string },
  ): ToolError | null => {
    if (held.jobs + 1 > jobs.limit) {
      return new ToolError(
        "busy",
        `${whose} already has ${describe(held)}, the most allowed (${jobs.key} = ${jobs.limit}); ` +
          advice,
      );
    }
    if (held.images + images > pictures.limit) {
      const now = held.jobs === 0 ? "" : `; it has ${describe(held)}`;
      return new ToolError(
        "busy",
        images > pictures.limit
          ? `this call asks for ${
            plural(images, "image")
          }, more than ${whose} may have queued or ` +
            `running at once (${pictures.key} = ${pictures.limit}); ask for at most ${pictures.limit}`
          : `this call's ${plural(images, "image")} would bring ${whose} to ${
            held.images + images
          } images queued or running, over ${pictures.key} = ${pictures.limit}${now}; ${advice}`,
      );
    }
    return null;
  };
  const key = check(
    "this API key",
    usage.key,
    { limit: limits.perKey.jobs, key: "jobs.max_jobs_per_key" },
    { limit: limits.perKey.images, key: "jobs.max_images_per_key" },
  );
  if (key || who.project === null || usage.project === null) return key;
  return check(
    `project ${who.project} (all its API keys together)`,
    usage.project,
    { limit: limits.perProject.jobs, key: "jobs.max_jobs_per_project" },
    { limit: limits.perProject.images, key: "jobs.max_images_per_project" },
  );
}
