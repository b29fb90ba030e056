/**
 * Generation jobs as MCP tasks (`mod/mcp/tasks.ts`): a task IS a job, so a
 * task has the job's id, owner (API key or stdio client), project
 * visibility, result TTL and size caps, and is cancelled the way a job is
 * (a flag in the shared store that the replica running it reads between
 * sampler steps). A job made by a plain call (a hand-off) can be polled as
 * a task too, and a task's job is listed and fetched by `list_generations`
 * and `get_generation`.
 *
 * @module
 */

import type { Scope } from "../mcp/tool.ts";
import type { TaskBackend, TaskCancelOutcome, TaskState, TaskView } from "../mcp/tasks.ts";
import { formatDuration } from "./estimate.ts";
import { jobResult } from "./result.ts";

/** The first MCP revision with tasks (2025-11-25, experimental): what a task's client speaks at least. */
const TASKS_REVISION = "2025-11-25";
import { callerOf, type JobService } from "./service.ts";
import { isTerminal, type JobOwner, type JobRecord, jobsAhead, type JobSummary } from "./types.ts";

/** How often a wait re-reads a job another replica runs (its notifications can be missed). */
const POLL_MS = 1000;

/** How long a 2025-11-25 `tasks/cancel` waits for the sampler to stop (one step is up to ~20 s on a slow CPU). */
const CANCEL_SETTLE_MS = 30_000;

function taskState(job: JobSummary): TaskState {
  switch (job.state) {
    case "queued":
    case "running":
      return "working";
    case "succeeded":
      return "completed";
    case "failed":
      return "failed";
    case "cancelled":
      return "cancelled";
  }
}

/** What an ended job came to, in a sentence (where a cancelled one stopped, why one failed). */
function outcome(job: JobSummary): string {
  const p = job.progress;
  const at = p
    ? ` at step ${p.step} of ${p.steps}${
      job.images > 1 ? ` of image ${p.image} of ${job.images}` : ""
    }`
    : "";
  switch (job.state) {
    case "cancelled":
      return `cancelled${p ? at : " before it started"}`;
    case "failed":
      return job.error ?? "failed";
    default:
      return `completed: ${job.images} image${job.images > 1 ? "s" : ""}`;
  }
}

/** See the module documentation. */
export class JobTasks implements TaskBackend {
  readonly #jobs: JobService;

  /** Tasks over `jobs`' store. */
  constructor(jobs: JobService) {
    this.#jobs = jobs;
  }

  /** What a poll says of a job that has not ended: where it is and how long it has left. */
  async #progress(job: JobSummary): Promise<string> {
    const position = job.state === "queued" ? await this.#jobs.store.position(job.seq) : null;
    const eta = this.#jobs.estimateMs(job, position);
    const left = eta === null ? "" : `; ${formatDuration(eta)} left`;
    if (position) {
      const ahead = jobsAhead(position);
      return `queued: ${ahead} job${ahead === 1 ? "" : "s"} ahead${left}`;
    }
    const p = job.progress;
    if (!p) return `starting${left}`;
    const image = job.images > 1 ? `image ${p.image} of ${job.images}, ` : "";
    const done = job.images > 1 ? ` (${p.imagesDone} finished)` : "";
    return `running: ${image}step ${p.step} of ${p.steps}${done}${left}`;
  }

  /** The task of `job`; `progress` adds the queue position and estimate of one still working. */
  async #view(job: JobSummary | JobRecord, progress = true): Promise<TaskView> {
    const state = taskState(job);
    const ended = state !== "working";
    return {
      id: job.id,
      state,
      statusMessage: !ended ? (progress ? await this.#progress(job) : job.state) : outcome(job),
      createdAt: job.createdAt,
      updatedAt: job.finishedAt ?? job.startedAt ?? job.createdAt,
      // Once it ended, what it is kept for (at least its TTL); before, its TTL (null for a
      // plain call's job, whose keeping starts when it ends).
      ttlMs: job.expiresAt ? job.expiresAt.getTime() - job.createdAt.getTime() : job.ttlMs,
      // Tasks exist from 2025-11-25 on, so every client of one takes `resource_link` blocks.
      ...(ended && "items" in job
        ? { result: await this.#jobs.deliver(jobResult(job), job, TASKS_REVISION) }
        : {}),
    };
  }

  async #record(id: string, caller: JobOwner): Promise<JobRecord | null> {
    const summary = await this.#jobs.store.summary(id, caller);
    if (!summary) return null;
    // Only an ended job's items are its result: a running one's are read when it ends.
    return isTerminal(summary.state)
      ? await this.#jobs.store.get(id, caller, { budget: this.#jobs.inlineBudget })
      : { ...summary, items: [], previews: [] };
  }

  /** {@inheritDoc TaskBackend.get} */
  async get(id: string, scope: Scope | undefined): Promise<TaskView | null> {
    const job = await this.#record(id, callerOf(scope));
    return job ? await this.#view(job) : null;
  }

  /** Resolves when job `id` ended, `signal` aborted or `ms` passed; null when it is not visible. */
  async #settle(
    id: string,
    caller: JobOwner,
    signal: AbortSignal,
    ms = Infinity,
  ): Promise<JobSummary | null> {
    const end = Date.now() + ms;
    for (;;) {
      const job = await this.#jobs.store.summary(id, caller);
      if (!job || isTerminal(job.state) || signal.aborted || Date.now() >= end) return job;
      await new Promise<void>((resolve) => {
        const done = () => {
          unsubscribe();
          clearTimeout(timer);
          signal.removeEventListener("abort", done);
          resolve();
        };
        const unsubscribe = this.#jobs.store.subscribe(id, (event) => {
          if (event.type === "state" && isTerminal(event.state)) done();
        });
        const timer = setTimeout(done, Math.min(POLL_MS, Math.max(0, end - Date.now())));
        signal.addEventListener("abort", done, { once: true });
      });
    }
  }

  /** {@inheritDoc TaskBackend.untilDone} */
  async untilDone(
    id: string,
    scope: Scope | undefined,
    signal: AbortSignal,
  ): Promise<TaskView | null> {
    const caller = callerOf(scope);
    if (!await this.#settle(id, caller, signal)) return null;
    return await this.get(id, scope);
  }

  /** {@inheritDoc TaskBackend.cancel} */
  async cancel(
    id: string,
    scope: Scope | undefined,
    settle: boolean,
  ): Promise<{ outcome: TaskCancelOutcome; task?: TaskView }> {
    const caller = callerOf(scope);
    const outcome = await this.#jobs.store.cancel(id, caller.owner);
    if (outcome === "unknown") {
      // Another key of the caller's project may see the job, but not stop it.
      const seen = await this.#jobs.store.summary(id, caller);
      return { outcome: seen && seen.owner !== caller.owner ? "not_owner" : "not_found" };
    }
    if (outcome === "finished") return { outcome: "ended" };
    if (!settle) return { outcome: "requested" };
    await this.#settle(id, caller, new AbortController().signal, CANCEL_SETTLE_MS);
    return { outcome: "requested", task: (await this.get(id, scope)) ?? undefined };
  }

  /**
   * {@inheritDoc TaskBackend.list} A cursor is `s` and the creation order
   * (`seq`) of the last task of the page before, so a page goes on where the
   * last ended even as new tasks are created.
   */
  async list(
    scope: Scope | undefined,
    limit: number,
    cursor?: string,
  ): Promise<{ tasks: TaskView[]; nextCursor?: string } | null> {
    let before: number | undefined;
    if (cursor !== undefined) {
      const match = /^s([1-9][0-9]{0,15})$/.exec(cursor);
      if (!match) return null;
      before = Number(match[1]);
    }
    const jobs = await this.#jobs.store.list(callerOf(scope), limit + 1, before);
    const page = jobs.slice(0, limit);
    return {
      tasks: await Promise.all(page.map((job) => this.#view(job, false))),
      ...(jobs.length > limit ? { nextCursor: `s${page.at(-1)!.seq}` } : {}),
    };
  }
}
