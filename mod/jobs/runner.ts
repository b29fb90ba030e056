/**
 * The engine's side of the queue: one loop that claims the oldest queued
 * job from the store, runs it, records its progress and items, and ends it.
 * One runner per engine, so jobs run one at a time (contract §2: "serialized
 * by one lock"). It wakes when a job is created in this process or, on a
 * shared store, by another replica, and polls as a safety net. On a shared
 * store it renews the lease of the running job (so a dead worker's job fails), which also
 * brings a cancellation whose notification was missed.
 *
 * A lease that cannot be renewed in time (the database stalled or went away
 * for a whole `lease_seconds`) ends the job as a dead worker's ends: it is
 * stopped at its next step and ends `failed` with {@link LEASE_LAPSED_REASON},
 * never retried. Every write carries the claim's token, so nothing this
 * worker sends late (a renewal, an image, the end) changes the job once the
 * lease has lapsed.
 *
 * @module
 */

import type { ImageRequest, RunHooks, RunOutcome } from "../generation/request.ts";
import { log } from "../log/mod.ts";
import type { ImageContent } from "../mcp/tool.ts";
import type { StoredPreview } from "./types.ts";
import { StepTimer } from "./estimate.ts";
import {
  type ClaimedJob,
  type JobClaim,
  type JobOutcome,
  type JobProgress,
  type JobStore,
  LEASE_LAPSED_REASON,
} from "./types.ts";

/** Runs one claimed job (the image pipeline). */
export type JobExecutor = (job: ClaimedJob, hooks: RunHooks) => Promise<RunOutcome>;

/** Options of {@link JobRunner}. */
export interface JobRunnerOptions {
  /** Where jobs come from. */
  store: JobStore;
  /** Runs a job. */
  execute: JobExecutor;
  /** This engine's name in the store (claims are made in its name). */
  worker: string;
  /** How often to look for jobs without being woken, in ms. */
  pollMs: number;
  /** The store's lease, in ms: renewed every third of it (only on stores with leases). */
  leaseMs?: number;
  /**
   * Checks a claimed job's stored request before it runs, as strictly as the
   * tools check their arguments (`checkImageRequest`); a throw fails the job
   * with its message, and nothing of it runs.
   */
  checkRequest: (request: unknown) => ImageRequest;
  /**
   * Makes the previews of a result's images as the job ends (delivery.ts
   * `planPreviews` with the server's inline budget), stored with the result
   * so that no poll of it encodes them again; absent: none are stored.
   */
  previews?: (images: ImageContent[]) => Promise<StoredPreview[]>;
  /** How often a stop asked for in a shared store is read, in ms (default {@link CANCEL_POLL_MS}). */
  cancelPollMs?: number;
}

/** The job running now, as `/healthz` and estimates see it. */
export interface RunningJob {
  /** Its id. */
  id: string;
  /** The tool that made it. */
  tool: ImageRequest["tool"];
  /** Images it makes. */
  images: number;
  /** Latest progress, or null before the first step. */
  progress: JobProgress | null;
  /** When it started (ms since epoch). */
  startedAt: number;
}

/**
 * How often the runner reads whether a stop of its running job was asked for
 * in a shared store (`JobStore.cancelRequested`): a key revoked by another
 * process (`deno task keys revoke`) or a cancellation whose notification
 * was missed stops the job within this, then at the sampler's next step.
 * One indexed read of one row per interval while a job runs.
 */
export const CANCEL_POLL_MS = 500;

/** Why the runner stopped a job itself. */
const SHUTDOWN_REASON = "the server shut down before this job finished";

/** See the module documentation. */
export class JobRunner {
  readonly #o: JobRunnerOptions;
  /** Measured speed of this engine. */
  readonly timer: StepTimer = new StepTimer();
  #current:
    | (RunningJob & { controller: AbortController; shutdown: boolean; leaseLost: boolean })
    | null = null;
  #wake: (() => void) | null = null;
  #stopping = false;
  #drain = false;
  #loop: Promise<void> | null = null;
  /** Claims failed in a row (logged once per streak). */
  #claimFailures = 0;

  /** Creates a stopped runner. */
  constructor(options: JobRunnerOptions) {
    this.#o = options;
  }

  /** The job running now, or null. */
  get current(): RunningJob | null {
    if (!this.#current) return null;
    const { id, tool, images, progress, startedAt } = this.#current;
    return { id, tool, images, progress, startedAt };
  }

  /** Starts the loop. */
  start(): void {
    this.#loop ??= this.#run();
  }

  /** Looks for a job now (one was created). */
  wake(): void {
    this.#wake?.();
  }

  /**
   * Stops claiming. With `drainQueue` the loop first runs every queued job
   * (nothing outlives an in-memory store); without, it stops after the
   * running one. Resolves when the loop has exited.
   */
  stop(drainQueue: boolean): Promise<void> {
    this.#stopping = true;
    this.#drain = drainQueue;
    this.wake();
    return this.#loop ?? Promise.resolve();
  }

  /** Stops the running job at its next step boundary; it ends as failed (shutdown). */
  abortCurrent(): void {
    // Past the deadline nothing more is started, even when draining.
    this.#drain = false;
    if (!this.#current) return;
    this.#current.shutdown = true;
    this.#current.controller.abort(new Error(SHUTDOWN_REASON));
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.#wake = done;
    });
  }

  async #run(): Promise<void> {
    for (;;) {
      if (this.#stopping && !this.#drain) return;
      let job: ClaimedJob | null;
      // The lease starts no earlier than this (the database sets it when the claim runs).
      const claimedAt = Date.now();
      try {
        job = await this.#o.store.claim(this.#o.worker);
      } catch (error) {
        // Once per outage, not once a second while the database is away.
        this.#claimFailures++;
        log(
          this.#claimFailures === 1 ? "warn" : "debug",
          "jobs",
          "could not claim the next job; retrying every second",
          { error: (error as Error)?.message ?? String(error) },
        );
        await this.#sleep(1000);
        continue;
      }
      if (this.#claimFailures > 0) {
        log("info", "jobs", "claiming jobs again", { failed_attempts: this.#claimFailures });
        this.#claimFailures = 0;
      }
      if (!job) {
        if (this.#stopping) return;
        await this.#sleep(this.#o.pollMs);
        continue;
      }
      await this.#runJob(job, claimedAt);
    }
  }

  async #runJob(claimed: ClaimedJob, claimedAt: number): Promise<void> {
    this.timer.jobStart();
    try {
      await this.#runClaimed(claimed, claimedAt);
    } finally {
      this.timer.jobDone();
    }
  }

  async #runClaimed(claimed: ClaimedJob, claimedAt: number): Promise<void> {
    const claim = claimed.claim;
    let job: ClaimedJob;
    try {
      job = { ...claimed, request: this.#o.checkRequest(claimed.request) };
    } catch (error) {
      const reason = (error as Error)?.message ?? String(error);
      log("warn", "jobs", "refused a job whose stored request is invalid", {
        job: claimed.id,
        error: reason,
      });
      await this.#finish(claim, { state: "failed", error: reason });
      return;
    }
    log("debug", "jobs", "job started", { job: job.id, worker: claim.worker });
    const controller = new AbortController();
    const current = {
      id: job.id,
      tool: job.request.tool,
      images: job.request.seeds.length,
      progress: null as JobProgress | null,
      startedAt: Date.now(),
      controller,
      shutdown: false,
      leaseLost: false,
    };
    this.#current = current;
    const unsubscribe = this.#o.store.subscribe(job.id, (event) => {
      if (event.type === "cancel") controller.abort(new Error("cancelled with cancel_generation"));
    });
    if (job.cancelRequested) controller.abort(new Error("cancelled with cancel_generation"));
    const loseLease = (why: string) => {
      if (current.leaseLost) return;
      current.leaseLost = true;
      log("warn", "jobs", `${why}; stopping it (it ends as failed)`, { job: job.id });
      controller.abort(new Error(LEASE_LAPSED_REASON));
    };
    const lease = this.#holdLease(claim, claimedAt, controller, loseLease);
    const watch = this.#watchCancel(claim, controller);
    let imagesDone = 0;
    // Items stored so far: the position of the next one, so a retried write is idempotent.
    let stored = 0;
    /** The images stored, for their previews as the job ends. */
    const images: ImageContent[] = [];
    let outcome: JobOutcome;
    try {
      const result = await this.#o.execute(job, {
        signal: controller.signal,
        onImageStart: () => this.timer.imageStart(job.request.tool),
        onProgress: (p) => {
          this.timer.step(p.step, p.steps);
          current.progress = { ...p, imagesDone };
          this.#o.store.progress(claim, current.progress);
        },
        onItems: async (items, index) => {
          this.timer.imageDone();
          imagesDone = index;
          if (current.progress) current.progress = { ...current.progress, imagesDone };
          if (current.leaseLost) return;
          // A database restart must not lose finished images: retried like the end of the job.
          const held = await this.#persist(
            job.id,
            "could not store the images of a job",
            () => this.#o.store.append(claim, stored, items),
            () => current.leaseLost,
          );
          if (held === true) {
            stored += items.length;
            images.push(...items.filter((i): i is ImageContent => i.type === "image"));
          } else if (held === false) loseLease("the lease of the running job lapsed");
        },
      });
      outcome = current.leaseLost
        ? { state: "failed", error: LEASE_LAPSED_REASON }
        : current.shutdown && result.state === "cancelled"
        ? { state: "failed", error: SHUTDOWN_REASON }
        : result;
    } catch (error) {
      log("error", "jobs", "job failed outside the pipeline", {
        job: job.id,
        error: (error as Error)?.stack ?? String(error),
      });
      outcome = current.leaseLost
        ? { state: "failed", error: LEASE_LAPSED_REASON }
        : { state: "failed", error: (error as Error)?.message ?? String(error) };
    } finally {
      lease.stop();
      clearInterval(watch);
      unsubscribe();
      // Cleared before the store is told, so /healthz never shows a finished job as running.
      this.#current = null;
    }
    if (images.length && this.#o.previews && !current.leaseLost) {
      await this.#attachPreviews(claim, images);
    }
    await this.#finish(claim, outcome);
  }

  /**
   * Renews the lease every third of it while the job runs (and while it
   * winds down after a cancellation: stopping takes up to a step), retrying
   * every second after a renewal failed, and stops the job when the lease is
   * lost: the store says the claim no longer holds, or no renewal has been
   * answered for a whole lease. That is counted from when the last answered
   * renewal was sent, so this worker gives up no later than the database's
   * own lease ends; a renewal still on its way at that moment decides (the
   * database may have resumed just before, and then extended the lease).
   */
  #holdLease(
    claim: JobClaim,
    claimedAt: number,
    controller: AbortController,
    lose: (why: string) => void,
  ): { stop(): void } {
    const renew = this.#o.store.renew?.bind(this.#o.store);
    const leaseMs = this.#o.leaseMs;
    if (!renew || !leaseMs) return { stop() {} };
    const every = Math.max(100, leaseMs / 3);
    /** When the last answered renewal (or the claim) was sent: the lease holds past it. */
    let lastHeld = claimedAt;
    let failing = false;
    let busy = false;
    let lost = false;
    /** The lease ran out while a renewal was on its way: its answer decides. */
    let overdue = false;
    let lapse: ReturnType<typeof setTimeout> | undefined;
    const gone = (why: string) => {
      if (lost) return;
      lost = true;
      lose(why);
    };
    const lapsed = () =>
      gone(`no lease renewal was answered for ${leaseMs} ms (jobs.lease_seconds)`);
    const arm = () => {
      clearTimeout(lapse);
      lapse = setTimeout(() => {
        if (busy) overdue = true;
        else lapsed();
      }, Math.max(0, lastHeld + leaseMs - Date.now()));
    };
    arm();
    const tick = async () => {
      if (busy || lost || (!failing && Date.now() - lastHeld < every)) return;
      busy = true;
      const sentAt = Date.now();
      try {
        const lease = await renew(claim);
        if (!lease.held) {
          gone("lost the lease of the running job");
        } else if (!lost) {
          failing = false;
          overdue = false;
          lastHeld = sentAt;
          arm();
          if (lease.cancelRequested && !controller.signal.aborted) {
            controller.abort(new Error("cancelled with cancel_generation"));
          }
        }
      } catch (error) {
        // The database is away: the job goes on until the lease runs out (the timer above).
        failing = true;
        log("debug", "jobs", "could not renew the lease", { job: claim.id, error: String(error) });
      } finally {
        busy = false;
        if (overdue) lapsed();
      }
    };
    const renewal = setInterval(() => void tick(), Math.min(every, 1_000));
    return {
      stop() {
        clearInterval(renewal);
        clearTimeout(lapse);
      },
    };
  }

  /** Reads every {@link CANCEL_POLL_MS} whether a stop was asked for in the store; aborts then. */
  #watchCancel(
    claim: JobClaim,
    controller: AbortController,
  ): ReturnType<typeof setInterval> | undefined {
    const read = this.#o.store.cancelRequested?.bind(this.#o.store);
    if (!read) return undefined;
    let busy = false;
    return setInterval(() => {
      if (busy || controller.signal.aborted) return;
      busy = true;
      read(claim).then((asked) => {
        if (asked && !controller.signal.aborted) {
          controller.abort(new Error("a stop was asked for in the job store"));
        }
      }, (error) => {
        log("debug", "jobs", "could not read a stop request", {
          job: claim.id,
          error: String(error),
        });
      }).finally(() => busy = false);
    }, this.#o.cancelPollMs ?? CANCEL_POLL_MS);
  }

  /**
   * Makes and stores the previews of a finished job's images. A failure
   * costs only the saving: the result is delivered with previews made at
   * each read, as before they were stored.
   */
  async #attachPreviews(claim: JobClaim, images: ImageContent[]): Promise<void> {
    try {
      const previews = await this.#o.previews!(images);
      if (!previews.length) return;
      await this.#persist(
        claim.id,
        "could not store the previews of a job",
        () => this.#o.store.attachPreviews(claim, previews),
      );
    } catch (error) {
      log("warn", "jobs", "no stored previews for a job; they are made at each read", {
        job: claim.id,
        error: (error as Error)?.message ?? String(error),
      });
    }
  }

  async #finish(claim: JobClaim, outcome: JobOutcome): Promise<void> {
    try {
      await this.#persist(
        claim.id,
        "could not record the end of a job",
        () => this.#o.store.finish(claim, outcome),
      );
    } catch {
      // A job left `running` is failed when its lease runs out, or by the next start-up's recovery.
    }
  }

  /**
   * Runs a store write, retrying it while the database is away. On a shared
   * store it is retried while the lease could still hold (a database restart
   * must not turn a finished job into a failed one); throws the last error.
   * `giveUp` ends the retries early (the lease was lost: the write would
   * change nothing); it then resolves undefined.
   */
  async #persist<T>(
    id: string,
    what: string,
    write: () => Promise<T>,
    giveUp: () => boolean = () => false,
  ): Promise<T | undefined> {
    const tries = Math.max(5, Math.ceil((this.#o.leaseMs ?? 0) / 1000));
    for (let attempt = 1;; attempt++) {
      try {
        return await write();
      } catch (error) {
        log("warn", "jobs", what, {
          job: id,
          attempt,
          error: (error as Error)?.message ?? String(error),
        });
        if (attempt >= tries || (this.#stopping && !this.#drain)) throw error;
        await new Promise((r) => setTimeout(r, Math.min(1000 * attempt, 2000)));
        if (giveUp()) return undefined;
      }
    }
  }
}
