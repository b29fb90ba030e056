/**
 * What the tools return about jobs: a finished job's content (exactly what
 * the original call returns when it finishes in time), the status of one
 * still running (text a model can act on, plus the same as
 * `structuredContent`), the owner's list, and the one not-found error that
 * does not reveal whether another owner's job exists.
 *
 * @module
 */

import { errorResult, type TextContent, type ToolResult } from "../mcp/tool.ts";
import { formatDuration } from "./estimate.ts";
import type { JobRecord, JobSummary, QueuePosition } from "./types.ts";
import { jobsAhead } from "./types.ts";

/**
 * The content of a finished job. Succeeded: its items, nothing added.
 * Failed with one reason (a one-image call): that tool error. Cancelled or
 * stopped part-way: the finished images and a text saying what happened.
 * `isError` is set only when no image came out (contract §2.1).
 */
export function jobResult(job: JobRecord): ToolResult {
  const content = [...job.items];
  if (job.state === "succeeded") return { content };
  if (job.state === "failed" && job.items.length === 0 && job.error !== null) {
    return errorResult(job.error);
  }
  const made = content.filter((c) => c.type === "image").length;
  if (job.state === "cancelled") {
    content.push({
      type: "text",
      text: `generation ${job.id} was cancelled` +
        (job.images > 1
          ? ` after ${made} of ${job.images} images; the finished ones are above`
          : ""),
    });
  } else if (job.error !== null) {
    content.push({
      type: "text",
      text: `generation ${job.id} failed: ${job.error}` +
        (job.images > 1 ? ` (${made} of ${job.images} images were finished)` : ""),
    });
  }
  return made === 0 ? { content, isError: true } : { content };
}

/** Tool error for an id this caller cannot see. */
export function notFoundResult(id: string, ttlSeconds: number): ToolResult {
  return errorResult(
    `no generation job "${id}" for this caller: the id may be mistyped, its result may have ` +
      `expired (results are kept for ${ttlSeconds} s after the job ends, while space allows), ` +
      `or it may have been made with another API key (a key sees its own jobs and those of ` +
      `its project); list_generations shows the ones you can see`,
  );
}

/**
 * The sentence every image tool's description ends with: what a call does
 * when its images take longer than the server waits (`[generation]
 * max_wait_seconds`; Infinity: it never hands off).
 */
export function handOffDescription(maxWaitMs: number): string {
  if (!Number.isFinite(maxWaitMs)) {
    return "This server waits until the images are done; if a call is interrupted, " +
      "list_generations and get_generation still find its generation.";
  }
  return `When the images take longer than this server waits (${maxWaitMs / 1000} s), the call ` +
    "answers instead, not as an error, with a job_id, the progress and an estimate: call " +
    "get_generation with that job_id to get the images (exactly this tool's result), or " +
    "cancel_generation to stop it.";
}

/** What {@link statusResult} needs to know about a job that is not finished. */
export interface StatusInfo {
  /** The job. */
  job: JobSummary;
  /** Its place in the queue, when queued. */
  position: QueuePosition | null;
  /** Estimated ms until it is done, or null without measurements. */
  etaMs: number | null;
  /** The estimate counts only the steps: no image has been finished yet to measure the rest. */
  etaLowerBound?: boolean;
  /** How long `get_generation` waits per call, in seconds (Infinity: until done). */
  waitSeconds: number;
  /** Set when this process will not run it now (shutting down). */
  note?: string;
  /** The preset that runs it (`fast preset (lcm, 4 steps, guidance 1, tiny VAE)`), when known. */
  sampling?: string;
}

function progressText(job: JobSummary): string {
  const p = job.progress;
  if (!p) return "starting";
  const image = job.images > 1 ? `image ${p.image} of ${job.images}, ` : "";
  const done = job.images > 1 ? `; ${p.imagesDone} finished` : "";
  return `${image}step ${p.step} of ${p.steps}${done}`;
}

/** The still-running answer: not an error, says what to call next. */
export function statusResult(info: StatusInfo): ToolResult {
  const { job, position, etaMs } = info;
  const what = `${job.tool}, ${job.images} image${job.images > 1 ? "s" : ""}`;
  const ahead = position ? jobsAhead(position) : 0;
  const where = job.state === "queued"
    ? `is queued (${what}): position ${ahead + 1} in the queue, ` +
      `${ahead} job${ahead === 1 ? "" : "s"} ahead of it (${position?.running.length ?? 0} ` +
      `running, ${position?.waiting.length ?? 0} waiting)`
    : `is still running (${what}): ${progressText(job)}`;
  const eta = etaMs === null
    ? "No time estimate yet: this server has not measured a step."
    : info.etaLowerBound
    ? `Estimated time left: at least ${formatDuration(etaMs)} (from this server's measured step ` +
      `times; decoding and saving are not measured until its first image is finished).`
    : `Estimated time left: ${formatDuration(etaMs)} (from this server's measured step times).`;
  const wait = Number.isFinite(info.waitSeconds)
    ? ` (each call waits up to ${info.waitSeconds} s)`
    : "";
  const lines = [
    `Generation ${job.id} ${where}.`,
    ...(info.sampling ? [`It runs with the ${info.sampling}.`] : []),
    eta,
    ...(info.note ? [info.note] : []),
    `Call get_generation with job_id "${job.id}" to get the result${wait}; ` +
    `cancel_generation with the same job_id stops it.`,
  ];
  const text: TextContent = { type: "text", text: lines.join("\n") };
  return {
    content: [text],
    structuredContent: {
      job_id: job.id,
      state: job.state,
      tool: job.tool,
      images: job.images,
      progress: job.progress
        ? {
          image: job.progress.image,
          step: job.progress.step,
          steps: job.progress.steps,
          images_done: job.progress.imagesDone,
        }
        : null,
      queue_position: job.state === "queued" ? ahead + 1 : null,
      jobs_ahead: job.state === "queued" ? ahead : null,
      eta_seconds: etaMs === null ? null : Math.round(etaMs / 1000),
      created_at: job.createdAt.toISOString(),
    },
  };
}

function excerpt(prompt: string): string {
  const chars = Array.from(prompt.trim().replace(/\s+/g, " "));
  return chars.length > 60 ? `${chars.slice(0, 57).join("")}...` : chars.join("");
}

/**
 * Most characters of the list's text: under the ~10 KB at which clients cut
 * a result's text (Copilot CLI: github/copilot-cli#1732; Codex:
 * openai/codex#6544), so a long list ends with a sentence saying how many
 * jobs it leaves out instead of losing its middle silently.
 */
export const LIST_TEXT_LIMIT = 7_000;

/**
 * The recent jobs a caller can see, newest first, as text and
 * `structuredContent`. Jobs of another key (of the caller's project) name
 * that key's prefix; `owner` is the caller's owner name. The text shows as
 * many jobs as fit {@link LIST_TEXT_LIMIT}; `structuredContent` has them all.
 */
export function listResult(jobs: JobSummary[], owner: string): ToolResult {
  if (jobs.length === 0) {
    return {
      content: [{
        type: "text",
        text: "No generation jobs for this caller (finished ones expire).",
      }],
      structuredContent: { generations: [] },
    };
  }
  const keyOf = (j: JobSummary) => j.owner === owner ? null : j.owner.replace(/^key:/, "");
  const lines = jobs.map((j) => {
    const progress = j.state === "running" ? ` (${progressText(j)})` : "";
    const by = keyOf(j) === null ? "" : `  by key ${keyOf(j)}`;
    return `${j.id}  ${j.state}${progress}  ${j.tool} x${j.images}  created ${j.createdAt.toISOString()}${by}  "${
      excerpt(j.prompt)
    }"`;
  });
  const head = `${jobs.length} generation job${jobs.length > 1 ? "s" : ""}, newest first:`;
  const tail = "get_generation with a job_id returns its images.";
  // Room for the head, the tail and the sentence about what is left out.
  let room = LIST_TEXT_LIMIT - head.length - tail.length - 200;
  let shown = 0;
  while (shown < lines.length && room >= lines[shown].length + 1) room -= lines[shown++].length + 1;
  const left = lines.length - shown;
  const more = left > 0
    ? [
      `... and ${left} older job${left > 1 ? "s" : ""} not shown here to keep this text short ` +
      `(structuredContent lists all ${jobs.length}; a smaller limit shows the newest).`,
    ]
    : [];
  return {
    content: [{ type: "text", text: [head, ...lines.slice(0, shown), ...more, tail].join("\n") }],
    structuredContent: {
      generations: jobs.map((j) => ({
        job_id: j.id,
        state: j.state,
        tool: j.tool,
        images: j.images,
        prompt: excerpt(j.prompt),
        // null for the caller's own jobs; another key's prefix for its project's.
        key: keyOf(j),
        created_at: j.createdAt.toISOString(),
        finished_at: j.finishedAt?.toISOString() ?? null,
        expires_at: j.expiresAt?.toISOString() ?? null,
      })),
    },
  };
}
