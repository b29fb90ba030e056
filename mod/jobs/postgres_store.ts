/**
 * The PostgreSQL job store, for HTTP: the same database as the API keys
 * (`DATABASE_URL` or the embedded default), tables from migration 2. Jobs
 * survive a restart: queued ones run, running ones are failed with their
 * reason by {@link PostgresJobStore.recover}.
 *
 * Shaped for a queue shared by replicas (issue 11): the queue is the
 * `state = 'queued'` rows in `seq` order, claimed with `FOR UPDATE SKIP
 * LOCKED` by a named worker; progress and cancellation requests are written
 * to the job row; a running job holds a lease (`worker`, `lease_expires_at`)
 * that every progress write and a heartbeat renew, and a job whose lease
 * runs out is failed by any process's sweep. Events reach subscribers in
 * this process at once, and those of other processes by reading the watched
 * job's row every `pollMs` (LISTEN/NOTIFY would push them instead; the
 * {@link Database} interface has no `listen` yet).
 *
 * Binary data (decoded input images, result PNGs) travels as base64 text
 * and is stored as `bytea` with `decode(…, 'base64')`, so the
 * {@link Database} interface needs no binary parameter type.
 *
 * @module
 */

import type { Database, Queryable, Row } from "../db/mod.ts";
import type { ImageRequest } from "../generation/request.ts";
import { log } from "../log/mod.ts";
import { JobEvents } from "./events.ts";
import { itemBytes } from "./memory_store.ts";
import { hasRoom, queueFullError } from "./queue_full.ts";
import type {
  CancelResult,
  ClaimedJob,
  JobEvent,
  JobItem,
  JobOutcome,
  JobProgress,
  JobRecord,
  JobState,
  JobStore,
  JobSummary,
  QueueCounts,
  QueuePosition,
  StoreLimits,
} from "./types.ts";
import { isTerminal } from "./types.ts";

/**
 * Key of the advisory lock that serializes job creation, so the queue-limit
 * check and the insert are one step: "sd15-job" read as a big-endian int64.
 */
export const JOB_CREATE_LOCK_ID = "8314824916500164450";

const SUMMARY = `id, owner, tool, state, images, request->>'positive' AS prompt, seq,
  created_at, started_at, finished_at, expires_at, progress::text AS progress, error,
  cancel_requested, result_bytes`;

const VISIBLE = `(expires_at IS NULL OR expires_at > now())`;

/** `bytea` as one line of base64 (PostgreSQL's encoder breaks lines every 76 characters). */
const b64 = (column: string) => `translate(encode(${column}, 'base64'), E'\\n', '')`;

const EXPIRES = `now() + ($TTL::double precision * interval '1 millisecond')`;

interface SummaryRow extends Row {
  id: string;
  owner: string;
  tool: JobSummary["tool"];
  state: JobState;
  images: number;
  prompt: string | null;
  seq: string | number;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
  expires_at: Date | null;
  progress: string | null;
  error: string | null;
  cancel_requested: boolean;
  result_bytes: string | number;
}

function toSummary(row: SummaryRow): JobSummary {
  return {
    id: row.id,
    owner: row.owner,
    tool: row.tool,
    state: row.state,
    images: Number(row.images),
    prompt: row.prompt ?? "",
    seq: Number(row.seq),
    createdAt: new Date(row.created_at),
    startedAt: row.started_at ? new Date(row.started_at) : null,
    finishedAt: row.finished_at ? new Date(row.finished_at) : null,
    expiresAt: row.expires_at ? new Date(row.expires_at) : null,
    progress: row.progress ? JSON.parse(row.progress) as JobProgress : null,
    error: row.error,
    cancelRequested: row.cancel_requested,
    resultBytes: Number(row.result_bytes),
  };
}

/** The request without pixel data (that goes to `input_image` / `input_mask`). */
function requestJson(request: ImageRequest): string {
  const { mode } = request;
  if (mode === "text_to_image") return JSON.stringify(request);
  const { image, ...rest } = request as Extract<ImageRequest, { mode: "guided_image" }>;
  const plain: Record<string, unknown> = {
    ...rest,
    image: { width: image.width, height: image.height },
  };
  if (mode === "inpaint_image") {
    plain.mask = { width: request.mask.width, height: request.mask.height };
  }
  return JSON.stringify(plain);
}

function parseRequest(json: string, image: string | null, mask: string | null): ImageRequest {
  const request = JSON.parse(json) as ImageRequest & {
    image?: { width: number; height: number; data?: Uint8Array };
    mask?: { width: number; height: number; data?: Uint8Array };
  };
  if (request.mode !== "text_to_image") {
    request.image.data = Uint8Array.fromBase64(image ?? "");
    if (request.mode === "inpaint_image") request.mask.data = Uint8Array.fromBase64(mask ?? "");
  }
  return request;
}

/**
 * The embedded PGlite server (pglite-socket 0.2) runs one backend for all
 * connections and queues each connection's data chunk by chunk, so a large
 * message (a base64 PNG) split over TCP reads can interleave with another
 * connection's messages and break the extended protocol ("bind message
 * supplies 2 parameters, but prepared statement requires 1"). On it, the
 * store runs its statements one at a time. A real server needs none of this.
 */
function serialized(db: Database): Database {
  let chain: Promise<unknown> = Promise.resolve();
  const next = <T>(fn: () => Promise<T>): Promise<T> => {
    const run = chain.then(fn, fn);
    chain = run.catch(() => {});
    return run;
  };
  return {
    target: db.target,
    kind: db.kind,
    query: (text, params, options) => next(() => db.query(text, params, options)),
    transaction: (fn) => next(() => db.transaction(fn)),
    close: () => db.close(),
  };
}

/** One watched job: what its listeners have heard, and the row poller. */
interface Watcher {
  listeners: number;
  state: JobState | null;
  progress: string | null;
  cancelled: boolean;
  timer: ReturnType<typeof setInterval> | undefined;
  polling?: boolean;
}

/** See the module documentation. */
export class PostgresJobStore implements JobStore {
  /** Always `postgres`. */
  readonly kind = "postgres" as const;
  readonly #db: Database;
  readonly #limits: StoreLimits;
  readonly #events = new JobEvents();
  readonly #pendingProgress = new Map<string, JobProgress>();
  readonly #writing = new Set<string>();
  readonly #writes = new Set<Promise<void>>();
  readonly #watchers = new Map<string, Watcher>();
  readonly #pollMs: number;

  /**
   * Uses `db` (already migrated); the caller closes it. `pollMs` is how often
   * a watched job's row is read for what other processes did to it.
   */
  constructor(db: Database, limits: StoreLimits, options: { pollMs?: number } = {}) {
    this.#db = db.kind === "embedded" ? serialized(db) : db;
    this.#limits = limits;
    this.#pollMs = options.pollMs ?? 1000;
  }

  #lease(sql: string): string {
    const ms = Math.round(this.#limits.leaseMs ?? 30_000);
    return sql.replaceAll("$LEASE", `now() + (${ms}::double precision * interval '1 millisecond')`);
  }

  /** Local delivery that the row watcher will not repeat. */
  #emit(id: string, event: JobEvent): void {
    const w = this.#watchers.get(id);
    if (w) {
      if (event.type === "progress") w.progress = JSON.stringify(event.progress);
      else if (event.type === "state") w.state = event.state;
      else w.cancelled = true;
    }
    this.#events.emit(id, event);
  }

  #ttl(sql: string): string {
    return sql.replaceAll("$TTL", String(Math.round(this.#limits.resultTtlMs)));
  }

  async #counts(q: Queryable = this.#db): Promise<QueueCounts> {
    const [row] = await q.query<{ queued: string; running: string }>(
      `SELECT count(*) FILTER (WHERE state = 'queued') AS queued,
              count(*) FILTER (WHERE state = 'running') AS running
         FROM mcp_generation_jobs WHERE state IN ('queued', 'running')`,
    );
    return { queued: Number(row.queued), running: Number(row.running) };
  }

  /** Creates a queued job, refusing it when the queue is full (one step, under a lock). */
  create(job: { id: string; owner: string; request: ImageRequest }): Promise<JobSummary> {
    const { request } = job;
    const image = request.mode === "text_to_image" ? null : request.image.data.toBase64();
    const mask = request.mode === "inpaint_image" ? request.mask.data.toBase64() : null;
    return this.#db.transaction(async (tx) => {
      await tx.query("SELECT pg_advisory_xact_lock($1::bigint)", [JOB_CREATE_LOCK_ID]);
      const counts = await this.#counts(tx);
      if (!hasRoom(counts, this.#limits.queueLimit)) {
        throw queueFullError(counts, this.#limits.queueLimit);
      }
      const [row] = await tx.query<SummaryRow>(
        `INSERT INTO mcp_generation_jobs (id, owner, tool, state, request, images, input_image, input_mask)
         VALUES ($1, $2, $3, 'queued', $4::text::jsonb, $5, decode($6, 'base64'), decode($7, 'base64'))
         RETURNING ${SUMMARY}`,
        [job.id, job.owner, request.tool, requestJson(request), request.seeds.length, image, mask],
      );
      return toSummary(row);
    });
  }

  /** Throws the "busy" error {@link create} would. */
  async assertRoom(): Promise<void> {
    const counts = await this.#counts();
    if (!hasRoom(counts, this.#limits.queueLimit)) {
      throw queueFullError(counts, this.#limits.queueLimit);
    }
  }

  /** The owner's job with its items. */
  async get(id: string, owner: string): Promise<JobRecord | null> {
    const summary = await this.summary(id, owner);
    if (!summary) return null;
    const rows = await this.#db.query<
      { text: string | null; mime_type: string | null; data: string | null }
    >(
      `SELECT text, mime_type, ${b64("data")} AS data FROM mcp_generation_items
        WHERE job_id = $1 ORDER BY position`,
      [id],
    );
    const items: JobItem[] = rows.map((r) =>
      r.text !== null
        ? { type: "text", text: r.text }
        : { type: "image", data: r.data ?? "", mimeType: r.mime_type ?? "image/png" }
    );
    return { ...summary, items };
  }

  /** The owner's job without items. */
  async summary(id: string, owner: string): Promise<JobSummary | null> {
    const [row] = await this.#db.query<SummaryRow>(
      `SELECT ${SUMMARY} FROM mcp_generation_jobs WHERE id = $1 AND owner = $2 AND ${VISIBLE}`,
      [id, owner],
    );
    return row ? toSummary(row) : null;
  }

  /** The owner's most recent jobs, newest first. */
  async list(owner: string, limit: number): Promise<JobSummary[]> {
    const rows = await this.#db.query<SummaryRow>(
      `SELECT ${SUMMARY} FROM mcp_generation_jobs WHERE owner = $1 AND ${VISIBLE}
        ORDER BY seq DESC LIMIT $2`,
      [owner, limit],
    );
    return rows.map(toSummary);
  }

  /** Queued jobs (and their images) ahead of `seq`. */
  async position(seq: number): Promise<QueuePosition> {
    const [row] = await this.#db.query<{ jobs: string; images: string }>(
      `SELECT count(*) AS jobs, coalesce(sum(images), 0) AS images FROM mcp_generation_jobs
        WHERE state = 'queued' AND seq < $1`,
      [seq],
    );
    return { jobsAhead: Number(row.jobs), imagesAhead: Number(row.images) };
  }

  /** Queue depth and running jobs. */
  counts(): Promise<QueueCounts> {
    return this.#counts();
  }

  /** Claims the oldest queued job; concurrent claimers skip each other's locked rows. */
  async claim(worker: string): Promise<ClaimedJob | null> {
    const [row] = await this.#db.query<
      {
        id: string;
        request: string;
        image: string | null;
        mask: string | null;
        cancel_requested: boolean;
      }
    >(
      this.#lease(
        `UPDATE mcp_generation_jobs SET state = 'running', started_at = now(), worker = $1,
               lease_expires_at = $LEASE
        WHERE id = (SELECT id FROM mcp_generation_jobs WHERE state = 'queued'
                     ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED)
        RETURNING id, request::text AS request, ${b64("input_image")} AS image,
                  ${b64("input_mask")} AS mask, cancel_requested`,
      ),
      [worker],
    );
    if (!row) return null;
    this.#emit(row.id, { type: "state", state: "running" });
    return {
      id: row.id,
      request: parseRequest(row.request, row.image, row.mask),
      cancelRequested: row.cancel_requested,
    };
  }

  /**
   * Tells local subscribers at once and writes the row in the background:
   * one write per job in flight, later progress coalesced into the next.
   */
  progress(id: string, progress: JobProgress): void {
    this.#emit(id, { type: "progress", progress: { ...progress } });
    this.#pendingProgress.set(id, { ...progress });
    if (this.#writing.has(id)) return;
    this.#writing.add(id);
    const write = (async () => {
      try {
        for (;;) {
          const next = this.#pendingProgress.get(id);
          if (!next) break;
          this.#pendingProgress.delete(id);
          // Each progress write also renews the lease and reads a cancellation made elsewhere.
          const [row] = await this.#db.query<{ cancel_requested: boolean }>(
            this.#lease(
              `UPDATE mcp_generation_jobs SET progress = $2::text::jsonb, lease_expires_at = $LEASE
                WHERE id = $1 AND state = 'running' RETURNING cancel_requested`,
            ),
            [id, JSON.stringify(next)],
          );
          if (row?.cancel_requested && !this.#watchers.get(id)?.cancelled) {
            this.#emit(id, { type: "cancel" });
          }
        }
      } catch (error) {
        this.#pendingProgress.delete(id);
        log("debug", "jobs", "progress not recorded", { job: id, error: String(error) });
      } finally {
        this.#writing.delete(id);
      }
    })();
    this.#writes.add(write);
    write.finally(() => this.#writes.delete(write));
  }

  /** Appends result items after the existing ones. */
  async append(id: string, items: JobItem[]): Promise<void> {
    const bytes = items.reduce((n, item) => n + itemBytes(item), 0);
    await this.#db.transaction(async (tx) => {
      const [row] = await tx.query<{ next: number }>(
        `SELECT coalesce(max(position) + 1, 0) AS next FROM mcp_generation_items WHERE job_id = $1`,
        [id],
      );
      let position = Number(row.next);
      for (const item of items) {
        await tx.query(
          `INSERT INTO mcp_generation_items (job_id, position, text, mime_type, data)
           VALUES ($1, $2, $3, $4, decode($5, 'base64'))`,
          item.type === "text"
            ? [id, position++, item.text, null, null]
            : [id, position++, null, item.mimeType, item.data],
        );
      }
      await tx.query(
        `UPDATE mcp_generation_jobs SET result_bytes = result_bytes + $2 WHERE id = $1`,
        [id, bytes],
      );
    });
  }

  /** Ends a running job and trims old results to the byte cap. */
  async finish(id: string, outcome: JobOutcome): Promise<void> {
    // Progress still being written must not land after the final state.
    this.#pendingProgress.delete(id);
    const rows = await this.#db.query(
      this.#ttl(
        `UPDATE mcp_generation_jobs SET state = $2, error = $3, cancel_requested = false,
            finished_at = now(), expires_at = ${EXPIRES}, input_image = NULL, input_mask = NULL
          WHERE id = $1 AND state = 'running' RETURNING id`,
      ),
      [id, outcome.state, outcome.error],
    );
    if (rows.length) this.#emit(id, { type: "state", state: outcome.state });
    await this.#trim();
  }

  /** Deletes the oldest finished jobs while stored results exceed the cap (the newest stays). */
  async #trim(): Promise<void> {
    const deleted = await this.#db.query<{ id: string }>(
      `DELETE FROM mcp_generation_jobs WHERE id IN (
         SELECT id FROM (
           SELECT id,
                  row_number() OVER (ORDER BY finished_at DESC, seq DESC) AS rank,
                  sum(result_bytes) OVER (ORDER BY finished_at DESC, seq DESC) AS newer
             FROM mcp_generation_jobs WHERE finished_at IS NOT NULL
         ) t
         WHERE rank > 1 AND newer > $1::bigint - (
           SELECT coalesce(sum(result_bytes), 0) FROM mcp_generation_jobs WHERE finished_at IS NULL))
       RETURNING id`,
      [this.#limits.maxResultBytes],
    );
    if (deleted.length) {
      log("info", "jobs", "dropped old results to stay under jobs.max_result_mib", {
        jobs: deleted.length,
      });
    }
  }

  /** Cancels the owner's job. */
  async cancel(id: string, owner: string): Promise<CancelResult> {
    const removed = await this.#db.query(
      this.#ttl(
        `UPDATE mcp_generation_jobs SET state = 'cancelled', finished_at = now(),
            expires_at = ${EXPIRES}, input_image = NULL, input_mask = NULL
          WHERE id = $1 AND owner = $2 AND state = 'queued' RETURNING id`,
      ),
      [id, owner],
    );
    if (removed.length) {
      this.#emit(id, { type: "state", state: "cancelled" });
      return "removed";
    }
    const stopping = await this.#db.query(
      `UPDATE mcp_generation_jobs SET cancel_requested = true
        WHERE id = $1 AND owner = $2 AND state = 'running' RETURNING id`,
      [id, owner],
    );
    if (stopping.length) {
      this.#emit(id, { type: "cancel" });
      return "stopping";
    }
    return (await this.summary(id, owner)) ? "finished" : "unknown";
  }

  /** Fails every job left `running` by a process that is gone. */
  async recover(reason: string): Promise<string[]> {
    const rows = await this.#db.query<{ id: string }>(
      this.#ttl(
        `UPDATE mcp_generation_jobs SET state = 'failed', error = $1, cancel_requested = false,
            finished_at = now(), expires_at = ${EXPIRES}, input_image = NULL, input_mask = NULL
          WHERE state = 'running' RETURNING id`,
      ),
      [reason],
    );
    return rows.map((r) => r.id);
  }

  /** Renews the lease of a job `worker` runs, and hears of a cancellation made elsewhere. */
  async renew(id: string, worker: string): Promise<void> {
    const [row] = await this.#db.query<{ cancel_requested: boolean }>(
      this.#lease(
        `UPDATE mcp_generation_jobs SET lease_expires_at = $LEASE
          WHERE id = $1 AND worker = $2 AND state = 'running' RETURNING cancel_requested`,
      ),
      [id, worker],
    );
    if (row?.cancel_requested && !this.#watchers.get(id)?.cancelled) {
      this.#emit(id, { type: "cancel" });
    }
  }

  /** Fails running jobs whose worker stopped renewing their lease. */
  async expireLeases(reason: string): Promise<string[]> {
    const rows = await this.#db.query<{ id: string }>(
      this.#ttl(
        `UPDATE mcp_generation_jobs SET state = 'failed', error = $1, cancel_requested = false,
            finished_at = now(), expires_at = ${EXPIRES}, input_image = NULL, input_mask = NULL
          WHERE state = 'running' AND lease_expires_at < now() RETURNING id`,
      ),
      [reason],
    );
    for (const { id } of rows) this.#emit(id, { type: "state", state: "failed" });
    return rows.map((r) => r.id);
  }

  /** Deletes expired jobs (their items go with them). */
  async purgeExpired(): Promise<number> {
    const rows = await this.#db.query(
      `DELETE FROM mcp_generation_jobs WHERE expires_at <= now() RETURNING id`,
    );
    return rows.length;
  }

  /**
   * Listens to one job's events: those of this process at once, and what
   * other processes (replicas sharing the database) do to the job by reading
   * its row every `pollMs` while anyone listens.
   */
  subscribe(id: string, listener: (event: JobEvent) => void): () => void {
    const unsubscribe = this.#events.subscribe(id, listener);
    let w = this.#watchers.get(id);
    if (!w) {
      w = { listeners: 0, state: null, progress: null, cancelled: false, timer: undefined };
      this.#watchers.set(id, w);
      const watcher = w;
      watcher.timer = setInterval(() => this.#poll(id, watcher), this.#pollMs);
    }
    w.listeners++;
    const watcher = w;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      unsubscribe();
      if (--watcher.listeners === 0) {
        clearInterval(watcher.timer);
        if (this.#watchers.get(id) === watcher) this.#watchers.delete(id);
      }
    };
  }

  #poll(id: string, w: Watcher): void {
    if (w.polling) return;
    w.polling = true;
    const read = (async () => {
      try {
        const [row] = await this.#db.query<
          { state: JobState; progress: string | null; cancel_requested: boolean }
        >(
          `SELECT state, progress::text AS progress, cancel_requested FROM mcp_generation_jobs
            WHERE id = $1`,
          [id],
        );
        if (!row || w.listeners === 0) return;
        if (row.progress !== null && row.state === "running") {
          const progress = JSON.parse(row.progress) as JobProgress;
          if (JSON.stringify(progress) !== w.progress) {
            this.#emit(id, { type: "progress", progress });
          }
        }
        if (row.cancel_requested && !w.cancelled) this.#emit(id, { type: "cancel" });
        // Only the end matters across processes (waiters wake on it); claims are local news.
        if (row.state !== w.state && isTerminal(row.state)) {
          this.#emit(id, { type: "state", state: row.state });
        }
      } catch (error) {
        log("debug", "jobs", "job row not read", { job: id, error: String(error) });
      } finally {
        w.polling = false;
      }
    })();
    this.#writes.add(read);
    read.finally(() => this.#writes.delete(read));
  }

  /** Stops watching rows and waits for background writes and reads. */
  async close(): Promise<void> {
    for (const w of this.#watchers.values()) clearInterval(w.timer);
    this.#watchers.clear();
    await Promise.allSettled([...this.#writes]);
  }
}
