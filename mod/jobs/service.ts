/**
 * Jobs as the tools see them: submit a request and wait for it at most
 * `[generation] max_wait_seconds`, fetch, cancel and list the caller's jobs,
 * and the queue numbers of `/healthz`. A call whose job ends within the wait
 * returns the job's content — exactly what the tools returned before jobs;
 * otherwise it hands off with the job id and what to call next. Progress
 * notifications flow while a call is open; a cancellation of the call that
 * created the job cancels the job, while an HTTP client that only
 * disconnects leaves it running (MCP 2025-11-25: a disconnection is not a
 * cancellation), listed and fetchable.
 *
 * A job belongs to the API key that made it (its owner) and, when that key
 * is bound to a project, to the project: every key of the project may list
 * and fetch it, only its owner may cancel it. A call refused by a per-key or
 * per-project limit is told when to retry: which of the jobs holding the
 * room must end first, and when that should be from this engine's timings
 * (`quota.ts`).
 *
 * @module
 */

import type { ImageRequest } from "../generation/request.ts";
import { log } from "../log/mod.ts";
import { type Scope, type ToolContext, ToolError, type ToolResult } from "../mcp/tool.ts";
import { callerOf } from "./caller.ts";
export { callerOf, ownerOf } from "./caller.ts";
import { newJobId } from "./job_id.ts";
import { deliverResult, INLINE_IMAGE_BUDGET, planPreviews } from "./delivery.ts";
import { type HeldJob, QuotaError, retryHint } from "./quota.ts";
import { QueueFullError } from "./queue_full.ts";
import { jobResult, listResult, notFoundResult, statusResult } from "./result.ts";
import { type JobExecutor, JobRunner } from "./runner.ts";
import type {
  JobOwner,
  JobProgress,
  JobStore,
  JobSummary,
  QueuePosition,
  StoredPreview,
  WorkAhead,
} from "./types.ts";
import { errorResult } from "../mcp/tool.ts";
import { isTerminal, jobsAhead, LEASE_LAPSED_REASON, taskTtlMs } from "./types.ts";

/**
 * How long a caller refused by a full queue is told to wait when this server
 * has no estimate (no step measured yet): about one 512×512 image at the
 * default steps on a 2-core x86-64 VM.
 */
export const UNTIMED_RETRY_MS = 30_000;

/** Options of {@link JobService}. */
export interface JobServiceOptions {
  /** Where jobs live. */
  store: JobStore;
  /** Runs a claimed job on the engine. */
  execute: JobExecutor;
  /** Checks a claimed job's stored request before it runs (`checkImageRequest`). */
  checkRequest: (request: unknown) => ImageRequest;
  /** How long a call waits for its job, in ms (Infinity: until done). */
  maxWaitMs: number;
  /** `[jobs] result_ttl_seconds`, for the not-found text. */
  resultTtlSeconds: number;
  /** `[generation] queue_limit`, for `/healthz`. */
  queueLimit: number;
  /** Steps per image (`[generation] steps`), for estimates before a job reports its own. */
  stepsPerImage: number;
  /**
   * Which preset this process's engine runs the jobs with, as one line
   * (`fast preset (lcm, 4 steps, guidance 1, tiny VAE)`), named in the text
   * of a handed-off or queued job; absent: not named (a `front` replica,
   * whose jobs run on workers that may be configured otherwise).
   */
  sampling?: string;
  /** This engine's name in the store. */
  worker: string;
  /** How often the runner looks for jobs without being woken, in ms (default 2000). */
  pollMs?: number;
  /** How often expired results are purged, in ms (default: a tenth of the TTL, 1 s to 60 s). */
  sweepMs?: number;
  /**
   * Whether this process runs jobs (default true). A `front` replica
   * (docs/deploy.md) only queues them and waits for the workers of the shared store.
   */
  engine?: boolean;
  /** `[jobs] lease_seconds` in ms, on a store with leases (default 30 s). */
  leaseMs?: number;
  /** Bytes of images a result carries inline (default `INLINE_IMAGE_BUDGET`, delivery.ts). */
  inlineImageBytes?: number;
}

/** `/healthz` numbers: no prompts, no owners. */
export interface JobHealth {
  /** Whether the engine runs a job, how many wait (null: store unreachable), the limit. */
  queue: { running: boolean; waiting: number | null; limit: number };
  /** On a shared store: jobs running and waiting over all replicas (null: store unreachable). */
  shared?: { running: number; waiting: number } | null;
  /** The running job's progress, or null. */
  running_job: {
    images: number;
    image: number | null;
    step: number | null;
    steps: number | null;
    images_done: number;
    elapsed_seconds: number;
    eta_seconds: number | null;
  } | null;
}

/** A database error that means "unreachable now" (see `DatabaseError.unavailable`). */
function isUnavailable(error: unknown): boolean {
  return (error as { unavailable?: unknown } | null)?.unavailable === true;
}

/**
 * How a tool's text names an unreachable database: without the error's own
 * message, which names the database (its host, or the embedded cluster).
 */
function databaseAway(error: unknown): string {
  return (error as { code?: unknown } | null)?.code === "TIMEOUT"
    ? "the database did not answer in time (it is stalled or unreachable)"
    : "the database is unavailable";
}

/**
 * Runs `read`, retrying for up to 30 s while the database is unreachable (a
 * restart of PostgreSQL must not turn a job that goes on into a failed call).
 */
async function untilReachable<T>(read: () => Promise<T>, signal: AbortSignal): Promise<T> {
  const end = Date.now() + 30_000;
  for (;;) {
    try {
      return await read();
    } catch (error) {
      if (!isUnavailable(error) || Date.now() > end || signal.aborted) throw error;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

/** See the module documentation. */
export class JobService {
  readonly #o: JobServiceOptions;
  readonly #runner: JobRunner;
  #closedMessage: string | null = null;
  #sweep: ReturnType<typeof setInterval> | undefined;
  #leaseSweep: ReturnType<typeof setInterval> | undefined;
  #unwatch: (() => void) | undefined;
  #stopped: Promise<void> | null = null;
  /** Waiters to wake when the engine loop stops (shutdown), and whether it has. */
  readonly #waiters = new Set<() => void>();
  #released = false;
  /** Jobs an open call waits for, with how many calls wait. */
  readonly #watched = new Map<string, number>();
  /** Waits ignore `max_wait_seconds` (no later call can fetch a hand-off). */
  #untilDone = false;

  /** Creates the service; {@link start} starts its engine loop. */
  constructor(options: JobServiceOptions) {
    this.#o = options;
    this.#runner = new JobRunner({
      store: options.store,
      execute: options.execute,
      worker: options.worker,
      pollMs: options.pollMs ?? 2000,
      leaseMs: options.store.renew ? options.leaseMs ?? 30_000 : undefined,
      checkRequest: options.checkRequest,
      previews: (images) => planPreviews(images, options.inlineImageBytes ?? INLINE_IMAGE_BUDGET),
    });
  }

  /** Bytes of images a delivered result carries inline (delivery.ts). */
  get #budget(): number {
    return this.#o.inlineImageBytes ?? INLINE_IMAGE_BUDGET;
  }

  /** The inline budget results are delivered within (what `store.get`'s `delivery` takes). */
  get inlineBudget(): number {
    return this.#budget;
  }

  /** How long a call waits for its job before handing off, in ms (Infinity: until done). */
  get maxWaitMs(): number {
    return this.#o.maxWaitMs;
  }

  /** The store in use. */
  get store(): JobStore {
    return this.#o.store;
  }

  /**
   * Fails the jobs a previous process left running (they cannot resume:
   * the engine state is gone), then starts running the queue and purging
   * expired results.
   */
  async start(): Promise<void> {
    await this.#o.store.open?.();
    const failed = await this.#o.store.recover(
      "the server restarted while this job was running",
    );
    if (failed.length) log("warn", "jobs", "jobs interrupted by a restart", { jobs: failed });
    const purged = await this.#o.store.purgeExpired();
    if (purged) log("info", "jobs", "purged expired jobs", { count: purged });
    const sweepMs = this.#o.sweepMs ??
      Math.min(60_000, Math.max(1000, this.#o.resultTtlSeconds * 100));
    this.#sweep = setInterval(() => {
      this.#o.store.purgeExpired().catch((error) =>
        log("warn", "jobs", "could not purge expired jobs", { error: String(error) })
      );
    }, sweepMs);
    const expire = this.#o.store.expireLeases?.bind(this.#o.store);
    if (expire) {
      const leaseMs = this.#o.leaseMs ?? 30_000;
      this.#leaseSweep = setInterval(() => {
        expire(LEASE_LAPSED_REASON).then((ids) => {
          if (ids.length) log("warn", "jobs", "jobs whose worker stopped", { jobs: ids });
        }, (error) => log("debug", "jobs", "could not check leases", { error: String(error) }));
      }, Math.max(100, Math.min(leaseMs / 2, 5000)));
    }
    if (this.#o.engine ?? true) {
      this.#unwatch = this.#o.store.onQueued?.(() => this.#runner.wake());
      this.#runner.start();
    }
  }

  /**
   * Throws the "busy" error a new job of `images` images by this caller
   * would get (full queue, the caller at its limits, or shutting down):
   * checked before any input is decoded.
   */
  async assertRoom(context: ToolContext, images = 1): Promise<void> {
    if (this.#closedMessage !== null) throw new ToolError("busy", this.#closedMessage);
    const caller = callerOf(context.scope);
    try {
      await this.#o.store.assertRoom(caller, images);
    } catch (error) {
      if (!isUnavailable(error)) await this.#withRetryHint(error, caller);
      throw new ToolError(
        "busy",
        `${databaseAway(error)}, so no generation was queued; call again once the server's ` +
          `/healthz answers 200`,
      );
    }
  }

  /**
   * Whether a new job of the caller `scope` would be refused now by the
   * queue (full, or the caller past its share): the HTTP server answers
   * such a call so that it can carry `Retry-After`.
   */
  async queueRefuses(scope: Scope | undefined): Promise<boolean> {
    if (this.#closedMessage !== null) return false;
    try {
      await this.#o.store.assertRoom(callerOf(scope), 1);
      return false;
    } catch (error) {
      return error instanceof QueueFullError;
    }
  }

  /**
   * Rethrows `error`; a per-key or per-project refusal gets
   * {@link retryHint}'s sentence added (when the jobs holding the room can
   * be read; the refusal stands without it otherwise).
   */
  async #withRetryHint(error: unknown, caller: JobOwner): Promise<never> {
    if (error instanceof QueueFullError) {
      throw error.withRetryAfter(await this.#slotFreesInMs() / 1000);
    }
    if (!(error instanceof QuotaError) || error.frees === null) throw error;
    let hint: string | null = null;
    try {
      const held: HeldJob[] = [];
      // Jobs run in creation order, so the ones still holding room are among the newest.
      for (const job of await this.#o.store.list(caller, 50)) {
        if (isTerminal(job.state)) continue;
        const counts = error.whose === "key"
          ? job.owner === caller.owner
          : job.project !== null && job.project === caller.project;
        if (!counts) continue;
        const own = job.owner === caller.owner;
        if (job.state === "running") {
          const live = this.#runner.current;
          const progress = live?.id === job.id ? live.progress ?? job.progress : job.progress;
          held.push({
            id: job.id,
            own,
            images: job.images,
            progress: progress ? { step: progress.step, steps: progress.steps } : null,
            place: null,
            etaMs: this.#remainingMs({ ...job, progress, id: job.id }),
          });
        } else {
          const position = await this.#o.store.position(job.seq);
          held.push({
            id: job.id,
            own,
            images: job.images,
            progress: null,
            place: jobsAhead(position) + 1,
            etaMs: this.#queuedMs(job, position),
          });
        }
      }
      hint = retryHint(error, held, !this.#runner.timer.measuredImage);
    } catch (reason) {
      log("debug", "jobs", "no retry hint for a refusal", { error: String(reason) });
    }
    if (hint === null) throw error;
    throw new QuotaError(`${error.message}. ${hint}`, error.whose, error.frees);
  }

  /**
   * Estimated ms until a slot of the queue frees: the soonest a running job
   * ends, from this engine's timings (its remaining steps, and its other
   * images); {@link UNTIMED_RETRY_MS} when nothing is measured yet or the
   * store cannot be read.
   */
  async #slotFreesInMs(): Promise<number> {
    try {
      const { running } = await this.#o.store.position(Number.MAX_SAFE_INTEGER);
      const times = running.map((work) => this.#remainingMs(work));
      if (times.length && times.every((ms) => ms !== null)) {
        return Math.max(1000, Math.min(...(times as number[])));
      }
    } catch (error) {
      log("debug", "jobs", "no retry estimate for a full queue", { error: String(error) });
    }
    return UNTIMED_RETRY_MS;
  }

  /** Creates the job of `request` and waits for it (bounded); see the module documentation. */
  async submit(request: ImageRequest, context: ToolContext): Promise<ToolResult> {
    if (this.#closedMessage !== null) throw new ToolError("busy", this.#closedMessage);
    const caller = callerOf(context.scope);
    const id = newJobId();
    // Watched from before it exists, so `cancelOwn(true)` never takes it for an abandoned one.
    this.#watchJob(id);
    try {
      let created: Awaited<ReturnType<JobStore["create"]>>;
      try {
        // A task is kept for the TTL its client asked for, within bounds (types.ts taskTtlMs).
        const ttlMs = context.startTask
          ? taskTtlMs(context.taskTtlMs, this.#o.resultTtlSeconds * 1000)
          : null;
        created = await this.#o.store.create({ id, ...caller, request, ttlMs });
      } catch (error) {
        if (!isUnavailable(error)) await this.#withRetryHint(error, caller);
        // The commit may have reached the database just before it stopped answering.
        throw new ToolError(
          "busy",
          `${databaseAway(error)} while this generation was being queued, so it may not have ` +
            `been: once the server's /healthz answers 200, list_generations shows it (id ${id}) ` +
            `if it was; call this tool again only if it is not listed`,
        );
      }
      this.#runner.wake();
      if (context.startTask) {
        // A task: the client polls for it (mod/jobs/tasks.ts), so the call answers at once.
        context.startTask({ id, createdAt: created.createdAt, ttlMs: created.ttlMs! });
        return { content: [] };
      }
      return await this.#wait(id, caller, this.#o.maxWaitMs, context, true);
    } finally {
      this.#unwatchJob(id);
    }
  }

  /** An open call waits for job `id` (see {@link cancelOwn}). */
  #watchJob(id: string): void {
    this.#watched.set(id, (this.#watched.get(id) ?? 0) + 1);
  }

  #unwatchJob(id: string): void {
    const watchers = (this.#watched.get(id) ?? 1) - 1;
    if (watchers > 0) this.#watched.set(id, watchers);
    else this.#watched.delete(id);
  }

  /** `get_generation`: the content when done, else the status after waiting up to `waitMs`. */
  get(id: string, waitMs: number, context: ToolContext): Promise<ToolResult> {
    return this.#wait(
      id,
      callerOf(context.scope),
      Math.min(waitMs, this.#o.maxWaitMs),
      context,
      false,
    );
  }

  /** `cancel_generation`: only the job's owner may. */
  async cancel(id: string, context: ToolContext): Promise<ToolResult> {
    const caller = callerOf(context.scope);
    const outcome = await this.#o.store.cancel(id, caller.owner);
    if (outcome === "unknown") {
      // A job of another key of the caller's project is visible, but not the caller's to stop.
      const seen = await this.#o.store.summary(id, caller);
      if (seen && seen.owner !== caller.owner) {
        return errorResult(
          `generation ${id} was made by another API key of project ${seen.project}; only that ` +
            `key can cancel it (this key may fetch and list it)`,
        );
      }
      return notFoundResult(id, this.#o.resultTtlSeconds);
    }
    if (outcome === "stopping") {
      // The engine stops at the next step boundary (one step is up to ~20 s on a slow CPU):
      // wait for it so the answer is final.
      return await this.#wait(id, caller, Math.max(this.#o.maxWaitMs, 30_000), context, false);
    }
    const record = await this.#o.store.get(id, caller, { budget: this.#budget });
    if (!record) return notFoundResult(id, this.#o.resultTtlSeconds);
    const result = await this.#deliver(jobResult(record), record, context);
    const note = outcome === "removed"
      ? `generation ${id} left the queue before it started; nothing was generated`
      : `generation ${id} had already ended (${record.state}); nothing to cancel`;
    if (outcome === "removed") return { content: [{ type: "text", text: note }] };
    return { ...result, content: [{ type: "text", text: note }, ...result.content] };
  }

  /** `list_generations`: the caller's jobs and, for a key bound to a project, the project's. */
  async list(limit: number, context: ToolContext): Promise<ToolResult> {
    const caller = callerOf(context.scope);
    return listResult(await this.#o.store.list(caller, limit), caller.owner);
  }

  /**
   * From now on, calls wait for their jobs until they end instead of handing
   * off after `max_wait_seconds` (still released by a shutdown): used over
   * stdio once the client closed its input, when no `get_generation` can
   * follow a hand-off.
   */
  waitUntilDone(): void {
    this.#untilDone = true;
  }

  /**
   * Cancels this process's own jobs (the stdio owner's): every queued one
   * leaves the queue and the running one stops at its next step. With
   * `keepWatched`, jobs an open call still waits for are left alone.
   * Returns the ids cancelled.
   */
  async cancelOwn(keepWatched: boolean): Promise<string[]> {
    const own = callerOf(undefined);
    const cancelled: string[] = [];
    for (const job of await this.#o.store.list(own, Number.MAX_SAFE_INTEGER)) {
      if (isTerminal(job.state) || (keepWatched && this.#watched.has(job.id))) continue;
      const outcome = await this.#o.store.cancel(job.id, own.owner);
      if (outcome === "removed" || outcome === "stopping") cancelled.push(job.id);
    }
    return cancelled;
  }

  /**
   * Queue depth and the running job's progress; `timeoutMs` bounds the one
   * database read (`/healthz` answers within `auth.db_timeout_ms`).
   */
  async health(timeoutMs?: number): Promise<JobHealth> {
    let counts: { queued: number; running: number } | null = null;
    try {
      counts = await this.#o.store.counts(timeoutMs);
    } catch (error) {
      // `/healthz` says the database is unavailable; a line per probe would flood the log.
      log("debug", "jobs", "queue depth unavailable", { error: String(error) });
    }
    const waiting = counts?.queued ?? null;
    const shared: JobHealth["shared"] = this.#o.store.onQueued
      ? (counts ? { running: counts.running, waiting: counts.queued } : null)
      : undefined;
    const current = this.#runner.current;
    const limit = this.#o.queueLimit;
    if (!current) {
      return { queue: { running: false, waiting, limit }, running_job: null, ...{ shared } };
    }
    const p = current.progress;
    const eta = this.#remainingMs(current);
    return {
      queue: { running: true, waiting, limit },
      ...{ shared },
      running_job: {
        images: current.images,
        image: p?.image ?? null,
        step: p?.step ?? null,
        steps: p?.steps ?? null,
        images_done: p?.imagesDone ?? 0,
        elapsed_seconds: Math.round((Date.now() - current.startedAt) / 100) / 10,
        eta_seconds: eta === null ? null : Math.round(eta / 1000),
      },
    };
  }

  /**
   * Refuses new jobs with a "busy" error saying `message`. The running job
   * goes on; with `drainQueue` the queued ones run too (an in-memory store
   * loses them otherwise), without they stay queued for the next start.
   * Resolves when the engine loop has stopped.
   */
  close(message: string, drainQueue: boolean): Promise<void> {
    this.#closedMessage ??= message;
    this.#stopped ??= this.#runner.stop(drainQueue).then(() => {
      this.#released = true;
      for (const release of [...this.#waiters]) release();
    });
    return this.#stopped;
  }

  /** Stops the running job now (the shutdown deadline passed). */
  abortRunning(): void {
    this.#runner.abortCurrent();
  }

  /** Stops the engine loop (after the running job) and the purge timer, and closes the store. */
  async dispose(): Promise<void> {
    await this.close("the server is shutting down; no new generations are accepted", false);
    clearInterval(this.#sweep);
    clearInterval(this.#leaseSweep);
    this.#unwatch?.();
    await this.#o.store.close();
  }

  #notify(context: ToolContext, p: JobProgress): void {
    if (p.images > 1) {
      void context.progress(
        (p.image - 1) * p.steps + p.step,
        p.images * p.steps,
        `image ${p.image}/${p.images}, step ${p.step}/${p.steps}`,
      );
    } else {
      void context.progress(p.step, p.steps, `step ${p.step}/${p.steps}`);
    }
  }

  async #wait(
    id: string,
    caller: JobOwner,
    waitMs: number,
    context: ToolContext,
    cancelOnAbort: boolean,
  ): Promise<ToolResult> {
    let wake!: () => void;
    const woke = new Promise<void>((r) => wake = r);
    const unsubscribe = this.#o.store.subscribe(id, (event) => {
      if (event.type === "progress") this.#notify(context, event.progress);
      else if (event.type === "state" && isTerminal(event.state)) wake();
    });
    const onAbort = () => {
      // A cancelled call cancels its job; a disconnected one only stops waiting.
      if (cancelOnAbort && (context.cancelled?.() ?? true)) {
        this.#o.store.cancel(id, caller.owner).catch((error) =>
          log("warn", "jobs", "could not cancel a job", { job: id, error: String(error) })
        );
      } else if (cancelOnAbort) {
        log("info", "jobs", "the client disconnected; its job goes on", { job: id });
      }
      wake();
    };
    context.signal.addEventListener("abort", onAbort, { once: true });
    // Past the bound the call hands off, unless no later call could fetch the job.
    const timer = Number.isFinite(waitMs)
      ? setTimeout(() => this.#untilDone || wake(), waitMs)
      : undefined;
    this.#watchJob(id);
    // Another replica may run the job: its notifications can be missed, the row cannot.
    const poll = this.#o.store.onQueued
      ? setInterval(() => {
        this.#o.store.summary(id, caller).then((s) => {
          if (!s || isTerminal(s.state)) wake();
          else if (s.progress) this.#notify(context, s.progress);
        }, () => {});
      }, this.#o.pollMs ?? 2000)
      : undefined;
    let note: string | undefined;
    // Shutting down: the engine loop has stopped, so no job this call waits for will run here now.
    const release = () => {
      note = "The server is shutting down; the job stays queued and runs when it starts again.";
      wake();
    };
    if (this.#released) release();
    this.#waiters.add(release);
    try {
      const first = await this.#o.store.summary(id, caller).catch((error) => {
        // The database is away: wait (the job goes on), and read it again below.
        if (!isUnavailable(error)) throw error;
        return { state: "queued" as const };
      });
      if (first && !isTerminal(first.state) && waitMs > 0 && !context.signal.aborted) await woke;
    } finally {
      this.#waiters.delete(release);
      this.#unwatchJob(id);
      unsubscribe();
      clearTimeout(timer);
      clearInterval(poll);
      context.signal.removeEventListener("abort", onAbort);
    }
    try {
      const record = await untilReachable(
        () => this.#o.store.get(id, caller, { budget: this.#budget }),
        context.signal,
      );
      if (!record) return notFoundResult(id, this.#o.resultTtlSeconds);
      if (isTerminal(record.state)) return await this.#deliver(jobResult(record), record, context);
      return await this.#status(record, record.state === "queued" ? note : undefined);
    } catch (error) {
      if (!isUnavailable(error)) throw error;
      return errorResult(
        `${databaseAway(error)}, so the state of generation ${id} cannot be read now. It stays ` +
          `stored: a queued generation runs once the database answers again, and one that was ` +
          `running ends as failed if the database was away longer than jobs.lease_seconds. Call ` +
          `get_generation with job_id "${id}" once the server's /healthz answers 200.`,
      );
    }
  }

  /** A finished job's result as this caller's client takes it (delivery.ts). */
  #deliver(
    result: ToolResult,
    job: JobSummary & { previews?: readonly StoredPreview[] },
    context: ToolContext,
  ): Promise<ToolResult> {
    return this.deliver(result, job, context.protocolVersion);
  }

  /**
   * A finished job's result as a client of `protocolVersion` takes it: images
   * within the inline budget, the rest as previews with links (delivery.ts).
   * Tasks return their result through it too, so a task's result is the one
   * `tools/call` would give.
   */
  deliver(
    result: ToolResult,
    job: JobSummary & { previews?: readonly StoredPreview[] },
    protocolVersion: string | undefined,
  ): Promise<ToolResult> {
    return deliverResult(result, job, { protocolVersion, inlineBytes: this.#budget });
  }

  /**
   * Estimated ms until `job` (queued, at `position`, or running) is done,
   * from this engine's timings; null without measurements or when it ended.
   */
  estimateMs(job: JobSummary, position: QueuePosition | null): number | null {
    if (job.state === "running") return this.#remainingMs({ ...job, id: job.id });
    return job.state === "queued" && position ? this.#queuedMs(job, position) : null;
  }

  /** Estimated ms until a running job (or one ahead in the queue) is done, from this engine's timings. */
  #remainingMs(work: WorkAhead): number | null {
    const live = this.#runner.current;
    const p = live && work.id === live.id ? live.progress ?? work.progress : work.progress;
    return this.#runner.timer.estimateMs({
      tool: work.tool,
      current: p ? { step: p.step, steps: p.steps } : null,
      images: p ? work.images - p.image : work.images,
      stepsPerImage: this.#o.stepsPerImage,
    });
  }

  /**
   * Estimated ms until a queued job is done: what the running jobs have
   * left and the jobs ahead of it, shared among the engines now busy (one
   * each), then its own images.
   */
  #queuedMs(job: JobSummary, position: QueuePosition): number | null {
    let ahead = 0;
    for (const work of [...position.running, ...position.waiting]) {
      const ms = this.#remainingMs(work);
      if (ms === null) return null;
      ahead += ms;
    }
    const own = this.#remainingMs({ tool: job.tool, images: job.images, progress: null });
    if (own === null) return null;
    return ahead / Math.max(1, position.running.length) + own;
  }

  async #status(job: JobSummary, note?: string): Promise<ToolResult> {
    let position: QueuePosition | null = null;
    let etaMs: number | null;
    const live = this.#runner.current;
    if (job.state === "running") {
      const progress = live?.id === job.id ? live.progress ?? job.progress : job.progress;
      job = { ...job, progress };
      etaMs = this.#remainingMs({ ...job, id: job.id });
    } else {
      position = await this.#o.store.position(job.seq);
      etaMs = this.#queuedMs(job, position);
    }
    return statusResult({
      job,
      position,
      etaMs,
      etaLowerBound: !this.#runner.timer.measuredImage,
      waitSeconds: this.#o.maxWaitMs / 1000,
      sampling: this.#o.sampling,
      note,
    });
  }
}
