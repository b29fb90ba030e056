/**
 * The PostgreSQL job store, for HTTP: the same database as the API keys
 * (`DATABASE_URL` or the embedded default), tables from migration 2. Jobs
 * survive a restart: queued ones run, running ones are failed with their
 * reason by {@link PostgresJobStore.recover}.
 *
 * Shaped for a queue shared by replicas (docs/deploy.md): the queue is the
 * `state = 'queued'` rows in `seq` order, claimed with `FOR UPDATE SKIP
 * LOCKED` by a named worker; progress and cancellation requests are written
 * to the job row; the `worker`, `lease_expires_at` and `lease_token`
 * columns are there for leases (every write of a running job carries its
 * claim's token: docs/database.md, "A stalled database"). Events reach subscribers in this process directly; a second
 * process would hear them through LISTEN/NOTIFY on the same rows.
 *
 * Binary data (decoded input images, result PNGs) travels as base64 text
 * and is stored as `bytea` with `decode(…, 'base64')`, so the
 * {@link Database} interface needs no binary parameter type.
 *
 * @module
 */

import { type Database, DatabaseError, type Queryable, type Row } from "../db/mod.ts";
import type { ImageRequest } from "../generation/request.ts";
import { log } from "../log/mod.ts";
import { JOB_CHANNEL, JobBus } from "./bus.ts";
import { previewBytes } from "./delivery.ts";
import { JobEvents } from "./events.ts";
import { FinishedCache } from "./finished_cache.ts";
import { itemBytes } from "./memory_store.ts";
import { queueRefusal } from "./queue_full.ts";
import { type OwnerUsage, quotaError } from "./quota.ts";
import { trimOrder } from "./trim.ts";
import {
  type CancelResult,
  type ClaimedJob,
  isTerminal,
  type JobClaim,
  type JobEvent,
  type JobItem,
  type JobOutcome,
  type JobOwner,
  type JobProgress,
  type JobRecord,
  type JobState,
  type JobStore,
  type JobSummary,
  LEASE_LAPSED_REASON,
  type LeaseRenewal,
  MIN_TASK_TTL_MS,
  type QueueCounts,
  type QueuePosition,
  type StoredPreview,
  type StoreLimits,
  type WorkAhead,
} from "./types.ts";

/**
 * Key of the advisory lock that serializes job creation, so the queue-limit
 * check and the insert are one step: "sd15-job" read as a big-endian int64.
 */
export const JOB_CREATE_LOCK_ID = "8314824916500164450";

const SUMMARY = `id, owner, project_id, tool, state, images, request->>'positive' AS prompt, seq,
  created_at, started_at, finished_at, expires_at, progress::text AS progress, error,
  cancel_requested, result_bytes, ttl_ms`;

const VISIBLE = `(expires_at IS NULL OR expires_at > now())`;

/** The rows a viewer (`$2` owner, `$3` project or null) may see: see `canSee`. */
const SEES = `(owner = $2 OR ($3::bigint IS NOT NULL AND project_id = $3::bigint))`;

/** `bytea` as one line of base64 (PostgreSQL's encoder breaks lines every 76 characters). */
const b64 = (column: string) => `translate(encode(${column}, 'base64'), E'\\n', '')`;

/** See `expiryOf` (types.ts): a task's TTL from creation, else the result TTL from the end. */
const EXPIRES = `CASE WHEN ttl_ms IS NULL
    THEN now() + ($TTL::double precision * interval '1 millisecond')
    ELSE greatest(created_at + (ttl_ms::double precision * interval '1 millisecond'),
                  now() + (${MIN_TASK_TTL_MS}::double precision * interval '1 millisecond'))
  END`;

interface SummaryRow extends Row {
  id: string;
  owner: string;
  project_id: string | number | null;
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
  ttl_ms: string | number | null;
}

function toSummary(row: SummaryRow): JobSummary {
  return {
    id: row.id,
    owner: row.owner,
    project: row.project_id === null ? null : Number(row.project_id),
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
    ttlMs: row.ttl_ms === null ? null : Number(row.ttl_ms),
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

/** Options of {@link PostgresJobStore} for a queue shared by replicas. */
export interface PostgresJobStoreOptions {
  /**
   * This replica's name: the worker name its claims are made in, the origin of
   * its notifications, and the `application_name` of its connections
   * (`sd15-mcp/<name>`, see {@link replicaApplicationName}).
   */
  replica?: string;
  /** How long a claim holds without renewal, in ms (`[jobs] lease_seconds`, default 30 s). */
  leaseMs?: number;
  /** How often the bus checks its own LISTEN, in ms (default 5000). */
  pingMs?: number;
}

/** The `application_name` of a replica's connections: how others see it is alive. */
export function replicaApplicationName(replica: string): string {
  return `sd15-mcp/${replica}`.slice(0, 63);
}

/** See the module documentation. */
export class PostgresJobStore implements JobStore {
  /** Always `postgres`. */
  readonly kind = "postgres" as const;
  readonly #db: Database;
  readonly #limits: StoreLimits;
  readonly #events = new JobEvents();
  /** Finished jobs' delivered content, so a repeated poll reads only the job's row (finished_cache.ts). */
  readonly #finished = new FinishedCache();
  readonly #pendingProgress = new Map<string, JobProgress>();
  readonly #writing = new Set<string>();
  readonly #writes = new Set<Promise<void>>();
  readonly #leaseMs: number;
  readonly #replica: string;
  #bus: JobBus | null;
  readonly #queued = new Set<() => void>();
  readonly #requestCancels = new Set<(owner: string, request: string | number) => void>();
  /**
   * Claims whose answer never came (a timeout or a lost connection), by
   * token: the row may have been claimed all the same, and nobody runs it.
   * `settled` turns true once the statement can no longer take effect.
   */
  readonly #unanswered = new Map<string, { sentAt: number; settled: boolean }>();

  /** Uses `db` (already migrated); the caller closes it. */
  constructor(db: Database, limits: StoreLimits, options: PostgresJobStoreOptions = {}) {
    this.#db = db;
    this.#limits = limits;
    this.#leaseMs = options.leaseMs ?? 30_000;
    this.#replica = options.replica ?? `${Deno.pid}-${crypto.randomUUID().slice(0, 8)}`;
    this.#bus = JobBus.for(db, this.#replica, { pingMs: options.pingMs });
    this.#bus?.on((message) => {
      if (message.t === "event") this.#events.emit(message.j, message.e);
      else if (message.t === "queued") { for (const l of [...this.#queued]) l(); }
      else if (message.t === "cancel_request") {
        for (const l of [...this.#requestCancels]) l(message.owner, message.request);
      }
    });
    this.#bus?.onReconnect(() => {
      for (const l of [...this.#queued]) l();
    });
  }

  /** Whether other replicas hear this one (a server database, not the embedded one). */
  get shared(): boolean {
    return this.#bus !== null;
  }

  /** Starts listening to the other replicas (nothing to do on the embedded database). */
  async open(): Promise<void> {
    try {
      await this.#bus?.start();
    } catch (error) {
      // Not fatal: the workers poll the queue and the waiters their jobs; the bus retries.
      log("warn", "jobs", "cannot listen for other replicas; polling only until it can", {
        error: String(error),
      });
    }
  }

  /** Runs `listener` when another replica queued a job. */
  onQueued(listener: () => void): () => void {
    this.#queued.add(listener);
    return () => this.#queued.delete(listener);
  }

  /** Passes a request cancellation to the other replicas. */
  cancelRequestElsewhere(owner: string, request: string | number): void {
    this.#bus?.publish({ t: "cancel_request", owner, request });
  }

  /** Runs `listener` for request cancellations passed on by other replicas. */
  onRequestCancel(listener: (owner: string, request: string | number) => void): () => void {
    this.#requestCancels.add(listener);
    return () => this.#requestCancels.delete(listener);
  }

  /** Tells this process's subscribers and the other replicas. */
  #emit(id: string, event: JobEvent): void {
    this.#events.emit(id, event);
    this.#bus?.publish({ t: "event", j: id, e: event });
  }

  #lease(): string {
    return `now() + (${Math.round(this.#leaseMs)}::double precision * interval '1 millisecond')`;
  }

  #ttl(sql: string): string {
    return sql.replaceAll("$TTL", String(Math.round(this.#limits.resultTtlMs)));
  }

  async #counts(q: Queryable = this.#db, timeoutMs?: number): Promise<QueueCounts> {
    const [row] = await q.query<{ queued: string; running: string }>(
      `SELECT count(*) FILTER (WHERE state = 'queued') AS queued,
              count(*) FILTER (WHERE state = 'running') AS running
         FROM mcp_generation_jobs WHERE state IN ('queued', 'running')`,
      [],
      timeoutMs === undefined ? {} : { timeoutMs },
    );
    return { queued: Number(row.queued), running: Number(row.running) };
  }

  /** What `who` and its project hold now (queued + running). */
  async #usage(who: JobOwner, q: Queryable): Promise<OwnerUsage> {
    const [row] = await q.query<Record<string, string>>(
      `SELECT count(*) FILTER (WHERE owner = $1) AS key_jobs,
              coalesce(sum(images) FILTER (WHERE owner = $1), 0) AS key_images,
              count(*) FILTER (WHERE project_id = $2::bigint) AS project_jobs,
              coalesce(sum(images) FILTER (WHERE project_id = $2::bigint), 0) AS project_images
         FROM mcp_generation_jobs
        WHERE state IN ('queued', 'running') AND (owner = $1 OR project_id = $2::bigint)`,
      [who.owner, who.project],
    );
    return {
      key: { jobs: Number(row.key_jobs), images: Number(row.key_images) },
      project: who.project === null
        ? null
        : { jobs: Number(row.project_jobs), images: Number(row.project_images) },
    };
  }

  /** The refusal a new job of `images` images by `who` gets now, or null. */
  async #refusal(who: JobOwner, images: number, q: Queryable): Promise<Error | null> {
    const limits = this.#limits.perOwner;
    let usage: OwnerUsage | null = null;
    if (limits) {
      usage = await this.#usage(who, q);
      const refused = quotaError(who, images, usage, limits);
      if (refused) return refused;
    }
    const counts = await this.#counts(q);
    return queueRefusal(counts, this.#limits.queueLimit, usage, limits?.queueShares, who.project);
  }

  /**
   * Creates a queued job, refusing it when the queue is full or its owner
   * is at a limit (one step, under a lock, so concurrent calls of one key
   * cannot all pass the check).
   */
  create(
    job: JobOwner & { id: string; request: ImageRequest; ttlMs?: number | null },
  ): Promise<JobSummary> {
    const { request } = job;
    const image = request.mode === "text_to_image" ? null : request.image.data.toBase64();
    const mask = request.mode === "inpaint_image" ? request.mask.data.toBase64() : null;
    return this.#db.transaction(async (tx) => {
      await tx.query("SELECT pg_advisory_xact_lock($1::bigint)", [JOB_CREATE_LOCK_ID]);
      const refused = await this.#refusal(job, request.seeds.length, tx);
      if (refused) throw refused;
      const [row] = await tx.query<SummaryRow>(
        `INSERT INTO mcp_generation_jobs
           (id, owner, project_id, tool, state, request, images, input_image, input_mask, ttl_ms)
         VALUES ($1, $2, $3, $4, 'queued', $5::text::jsonb, $6, decode($7, 'base64'),
                 decode($8, 'base64'), $9::bigint)
         RETURNING ${SUMMARY}`,
        [
          job.id,
          job.owner,
          job.project,
          request.tool,
          requestJson(request),
          request.seeds.length,
          image,
          mask,
          job.ttlMs ?? null,
        ],
      );
      // Delivered at commit, when the row is visible to the claimers.
      if (this.#bus) {
        await tx.query("SELECT pg_notify($1, $2)", [
          JOB_CHANNEL,
          this.#bus.payload({ t: "queued" }),
        ]);
      }
      return toSummary(row);
    });
  }

  /** Throws the "busy" error {@link create} would. */
  async assertRoom(who: JobOwner, images: number): Promise<void> {
    const refused = await this.#refusal(who, images, this.#db);
    if (refused) throw refused;
  }

  /** The job with its items, when `viewer` may see it. */
  async get(
    id: string,
    viewer: JobOwner,
    delivery?: { budget: number },
  ): Promise<JobRecord | null> {
    // Who may see the job is asked of the database on every read, cached content or not.
    const summary = await this.summary(id, viewer);
    if (!summary) return null;
    // (Kept by the budget it was read for: an image with a preview for it is read empty.)
    const keep = delivery && isTerminal(summary.state) ? delivery.budget : null;
    const cached = keep === null ? undefined : this.#finished.get(id, keep);
    if (cached) return { ...summary, items: [...cached.items], previews: [...cached.previews] };
    // An image with a preview for the delivery's budget is not read: its preview is sent instead.
    const rows = await this.#db.query<
      { text: string | null; mime_type: string | null; data: string | null }
    >(
      `WITH items AS (
         SELECT position, text, mime_type, data, count(data) OVER (ORDER BY position) AS image
           FROM mcp_generation_items WHERE job_id = $1
       )
       SELECT i.text, i.mime_type,
              CASE WHEN i.data IS NULL THEN NULL WHEN p.image IS NOT NULL THEN ''
                   ELSE ${b64("i.data")} END AS data
         FROM items i
         LEFT JOIN mcp_generation_previews p
           ON $2::integer IS NOT NULL AND p.job_id = $1 AND p.image = i.image
              AND i.data IS NOT NULL AND p.budget = $2::integer
        ORDER BY i.position`,
      [id, delivery?.budget ?? null],
    );
    const items: JobItem[] = rows.map((r) =>
      r.text !== null
        ? { type: "text", text: r.text }
        : { type: "image", data: r.data ?? "", mimeType: r.mime_type ?? "image/png" }
    );
    const previews = await this.#db.query<
      Record<string, string | number> & { mime_type: StoredPreview["mimeType"]; data: string }
    >(
      `SELECT image, budget, mime_type, width, height, ${b64("data")} AS data, full_width,
              full_height, full_bytes
         FROM mcp_generation_previews WHERE job_id = $1 ORDER BY image`,
      [id],
    );
    const content = {
      items,
      previews: previews.map((r): StoredPreview => ({
        image: Number(r.image),
        budget: Number(r.budget),
        mimeType: r.mime_type,
        width: Number(r.width),
        height: Number(r.height),
        data: r.data,
        full: {
          width: Number(r.full_width),
          height: Number(r.full_height),
          bytes: Number(r.full_bytes),
        },
      })),
    };
    // A finished job's items and previews are written only while it runs (under its claim), so
    // what was read now stays right for every later read of it.
    if (keep !== null) this.#finished.set(id, keep, content);
    return { ...summary, ...content };
  }

  /** The job without items, when `viewer` may see it. */
  async summary(id: string, viewer: JobOwner): Promise<JobSummary | null> {
    const [row] = await this.#db.query<SummaryRow>(
      `SELECT ${SUMMARY} FROM mcp_generation_jobs WHERE id = $1 AND ${SEES} AND ${VISIBLE}`,
      [id, viewer.owner, viewer.project],
    );
    return row ? toSummary(row) : null;
  }

  /** The most recent jobs `viewer` may see, newest first. */
  async list(viewer: JobOwner, limit: number, beforeSeq?: number): Promise<JobSummary[]> {
    const rows = await this.#db.query<SummaryRow>(
      `SELECT ${SUMMARY} FROM mcp_generation_jobs
        WHERE ${SEES} AND ${VISIBLE} AND ($4::bigint IS NULL OR seq < $4::bigint)
        ORDER BY seq DESC LIMIT $1`,
      [limit, viewer.owner, viewer.project, beforeSeq ?? null],
    );
    return rows.map(toSummary);
  }

  /** The running jobs and the queued ones ahead of `seq`. */
  async position(seq: number): Promise<QueuePosition> {
    const rows = await this.#db.query<
      {
        id: string;
        state: string;
        tool: WorkAhead["tool"];
        images: number;
        progress: string | null;
      }
    >(
      `SELECT id, state, tool, images, progress::text AS progress FROM mcp_generation_jobs
        WHERE state = 'running' OR (state = 'queued' AND seq < $1) ORDER BY seq`,
      [seq],
    );
    const running: WorkAhead[] = [];
    const waiting: WorkAhead[] = [];
    for (const r of rows) {
      const work = {
        tool: r.tool,
        images: Number(r.images),
        progress: r.progress ? JSON.parse(r.progress) as JobProgress : null,
      };
      if (r.state === "running") running.push({ ...work, id: r.id });
      else waiting.push(work);
    }
    return { running, waiting };
  }

  /** Queue depth and running jobs; `timeoutMs` bounds the wait. */
  counts(timeoutMs?: number): Promise<QueueCounts> {
    return this.#counts(this.#db, timeoutMs);
  }

  /**
   * Claims the oldest queued job; concurrent claimers skip each other's
   * locked rows. Each claim carries a fresh token (see {@link JobClaim}).
   * A claim whose answer never came may still have taken a row: the next
   * call first puts such rows back in the queue (they never ran), and sends
   * no new claim while one younger than a lease is still unanswered, so a
   * stalled database does not collect claims that all land when it resumes.
   */
  async claim(worker: string): Promise<ClaimedJob | null> {
    // Nothing is sent while a claim is still on its way: the database has not answered it.
    for (const [token, claim] of this.#unanswered) {
      const waited = Date.now() - claim.sentAt;
      if (!claim.settled && waited < this.#leaseMs) {
        throw new DatabaseError(
          `database unavailable: the previous claim (${token.slice(0, 8)}) has had no answer ` +
            `for ${Math.round(waited)} ms`,
          "TIMEOUT",
          true,
        );
      }
    }
    await this.#releaseUnanswered();
    const token = crypto.randomUUID();
    const sentAt = Date.now();
    let row;
    try {
      [row] = await this.#db.query<
        {
          id: string;
          request: string;
          image: string | null;
          mask: string | null;
          cancel_requested: boolean;
        }
      >(
        `UPDATE mcp_generation_jobs SET state = 'running', started_at = now(), worker = $1,
                lease_token = $2, lease_expires_at = ${this.#lease()}
          WHERE id = (SELECT id FROM mcp_generation_jobs WHERE state = 'queued'
                       ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED)
          RETURNING id, request::text AS request, ${b64("input_image")} AS image,
                    ${b64("input_mask")} AS mask, cancel_requested`,
        [worker, token],
      );
    } catch (error) {
      if (error instanceof DatabaseError && error.unavailable) {
        const unanswered = { sentAt, settled: false };
        this.#unanswered.set(token, unanswered);
        error.settled.then(() => unanswered.settled = true);
      }
      throw error;
    }
    if (!row) return null;
    this.#emit(row.id, { type: "state", state: "running" });
    return {
      id: row.id,
      request: parseRequest(row.request, row.image, row.mask),
      cancelRequested: row.cancel_requested,
      claim: { id: row.id, worker, token },
    };
  }

  /**
   * Puts back in the queue the rows taken by claims whose answer never came
   * (they never ran: nobody here knows them). A token is forgotten once its
   * claim had settled before this release was sent: it cannot take a row
   * any more.
   */
  async #releaseUnanswered(): Promise<void> {
    if (this.#unanswered.size === 0) return;
    const tokens = [...this.#unanswered.keys()];
    const settled = tokens.filter((token) => this.#unanswered.get(token)!.settled);
    const rows = await this.#db.query<{ id: string }>(
      `UPDATE mcp_generation_jobs SET state = 'queued', worker = NULL, lease_token = NULL,
              lease_expires_at = NULL, started_at = NULL, progress = NULL
        WHERE state = 'running'
          AND lease_token IN (SELECT jsonb_array_elements_text($1::text::jsonb))
        RETURNING id`,
      [JSON.stringify(tokens)],
    );
    for (const token of settled) this.#unanswered.delete(token);
    if (rows.length) {
      log("info", "jobs", "claims whose answer was lost are back in the queue", {
        jobs: rows.map((r) => r.id),
      });
      for (const { id } of rows) this.#emit(id, { type: "state", state: "queued" });
    }
  }

  /**
   * Tells local subscribers at once and writes the row in the background:
   * one write per job in flight, later progress coalesced into the next.
   */
  progress(claim: JobClaim, progress: JobProgress): void {
    const { id, token } = claim;
    this.#events.emit(id, { type: "progress", progress: { ...progress } });
    this.#pendingProgress.set(id, { ...progress });
    if (this.#writing.has(id)) return;
    this.#writing.add(id);
    const write = (async () => {
      try {
        for (;;) {
          const next = this.#pendingProgress.get(id);
          if (!next) break;
          this.#pendingProgress.delete(id);
          const update = `UPDATE mcp_generation_jobs SET progress = $2::text::jsonb
                           WHERE id = $1 AND lease_token = $3 AND state = 'running'`;
          if (this.#bus) {
            // The row and the other replicas' waiters hear it in one round trip.
            const event: JobEvent = { type: "progress", progress: next };
            await this.#db.query(
              `WITH u AS (${update} RETURNING id) SELECT pg_notify($4, $5) FROM u`,
              [
                id,
                JSON.stringify(next),
                token,
                JOB_CHANNEL,
                this.#bus.payload({ t: "event", j: id, e: event }),
              ],
            );
          } else {
            await this.#db.query(update, [id, JSON.stringify(next), token]);
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

  /** {@inheritDoc JobStore.append} */
  async append(claim: JobClaim, from: number, items: JobItem[]): Promise<boolean> {
    if (!items.length) return true;
    // One statement: the rows and the byte count commit together, and ON CONFLICT makes a
    // retry after a lost commit reply store nothing twice (only inserted rows are counted).
    // Only while the claim holds the row (locked, so the lease sweep cannot end it meanwhile).
    const rows = items.map((item, i) => ({
      position: from + i,
      bytes: itemBytes(item),
      ...(item.type === "text"
        ? { text: item.text, mime_type: null, data: null }
        : { text: null, mime_type: item.mimeType, data: item.data }),
    }));
    const [row] = await this.#db.query<{ held: string }>(
      `WITH job AS (
         SELECT id FROM mcp_generation_jobs
          WHERE id = $1 AND lease_token = $3 AND state = 'running' AND lease_expires_at > now()
          FOR UPDATE
       ), input AS (
         SELECT * FROM jsonb_to_recordset($2::text::jsonb)
           AS r(position integer, bytes bigint, text text, mime_type text, data text)
       ), inserted AS (
         INSERT INTO mcp_generation_items (job_id, position, text, mime_type, data)
         SELECT $1, position, text, mime_type, decode(data, 'base64') FROM input
          WHERE EXISTS (SELECT 1 FROM job)
         ON CONFLICT (job_id, position) DO NOTHING
         RETURNING position
       ), counted AS (
         UPDATE mcp_generation_jobs
            SET result_bytes = result_bytes +
              (SELECT coalesce(sum(bytes), 0) FROM input WHERE position IN (SELECT position FROM inserted))
          WHERE id IN (SELECT id FROM job)
         RETURNING id
       )
       SELECT count(*) AS held FROM job`,
      [claim.id, JSON.stringify(rows), claim.token],
    );
    return Number(row.held) > 0;
  }

  /** {@inheritDoc JobStore.attachPreviews} */
  async attachPreviews(claim: JobClaim, previews: StoredPreview[]): Promise<boolean> {
    // One statement, only while the claim holds the row, as `append`; a retry replaces nothing.
    const rows = previews.map((p) => ({
      image: p.image,
      budget: p.budget,
      mime_type: p.mimeType,
      width: p.width,
      height: p.height,
      data: p.data,
      full_width: p.full.width,
      full_height: p.full.height,
      full_bytes: p.full.bytes,
      bytes: previewBytes(p),
    }));
    const [row] = await this.#db.query<{ held: string }>(
      `WITH job AS (
         SELECT id FROM mcp_generation_jobs
          WHERE id = $1 AND lease_token = $3 AND state = 'running' AND lease_expires_at > now()
          FOR UPDATE
       ), input AS (
         SELECT * FROM jsonb_to_recordset($2::text::jsonb)
           AS r(image integer, budget integer, mime_type text, width integer, height integer,
                data text, full_width integer, full_height integer, full_bytes integer,
                bytes bigint)
       ), inserted AS (
         INSERT INTO mcp_generation_previews
           (job_id, image, budget, mime_type, width, height, data, full_width, full_height,
            full_bytes)
         SELECT $1, image, budget, mime_type, width, height, decode(data, 'base64'), full_width,
                full_height, full_bytes
           FROM input WHERE EXISTS (SELECT 1 FROM job)
         ON CONFLICT (job_id, image) DO NOTHING
         RETURNING image
       ), counted AS (
         UPDATE mcp_generation_jobs
            SET result_bytes = result_bytes +
              (SELECT coalesce(sum(bytes), 0) FROM input WHERE image IN (SELECT image FROM inserted))
          WHERE id IN (SELECT id FROM job)
         RETURNING id
       )
       SELECT count(*) AS held FROM job`,
      [claim.id, JSON.stringify(rows), claim.token],
    );
    return Number(row.held) > 0;
  }

  /**
   * Ends a running job and trims old results to the byte cap. Only while
   * `claim` holds the row; past its lease the job ends as `failed` with
   * {@link LEASE_LAPSED_REASON}, exactly as the lease sweep would end it, so
   * a job's end does not depend on which of the two reaches a resumed
   * database first.
   */
  async finish(claim: JobClaim, outcome: JobOutcome): Promise<void> {
    const { id, token } = claim;
    // Progress still being written must not land after the final state.
    this.#pendingProgress.delete(id);
    const rows = await this.#db.query<{ state: JobOutcome["state"] }>(
      this.#ttl(
        `UPDATE mcp_generation_jobs
            SET state = CASE WHEN lease_expires_at > now() THEN $2 ELSE 'failed' END,
                -- A reason written while it ran (its key was revoked) is kept for a bare end.
                error = CASE WHEN lease_expires_at > now() THEN coalesce($3, error) ELSE $5 END,
                cancel_requested = false, finished_at = now(), expires_at = ${EXPIRES},
                input_image = NULL, input_mask = NULL
          WHERE id = $1 AND lease_token = $4 AND state = 'running' RETURNING state`,
      ),
      [id, outcome.state, outcome.error, token, LEASE_LAPSED_REASON],
    );
    if (rows.length) this.#emit(id, { type: "state", state: rows[0].state });
    await this.#trim();
  }

  /** Drops finished results past the per-owner and global byte caps (see `trim.ts`). */
  async #trim(): Promise<void> {
    const rows = await this.#db.query<
      { id: string; owner: string; result_bytes: string; finished_at: Date | null; seq: string }
    >(
      `SELECT id, owner, result_bytes, finished_at, seq FROM mcp_generation_jobs
        WHERE finished_at IS NOT NULL OR result_bytes > 0`,
    );
    let unfinished = 0;
    const finished = [];
    for (const r of rows) {
      const bytes = Number(r.result_bytes);
      if (r.finished_at === null) unfinished += bytes;
      else {
        finished.push({
          id: r.id,
          owner: r.owner,
          resultBytes: bytes,
          finishedAt: new Date(r.finished_at),
          seq: Number(r.seq),
        });
      }
    }
    const drop = trimOrder(finished, {
      perOwnerBytes: this.#limits.perOwner?.perKey.resultBytes ?? Infinity,
      budgetBytes: this.#limits.maxResultBytes - unfinished,
    });
    if (!drop.length) return;
    const deleted = await this.#db.query<{ id: string }>(
      `DELETE FROM mcp_generation_jobs
        WHERE finished_at IS NOT NULL AND id IN (SELECT jsonb_array_elements_text($1::text::jsonb))
        RETURNING id`,
      [JSON.stringify(drop)],
    );
    for (const row of deleted) this.#finished.delete(row.id);
    if (deleted.length) {
      log("info", "jobs", "dropped old results to stay under the result caps", {
        jobs: deleted.length,
        caps: "jobs.max_result_mib, jobs.max_result_mib_per_key",
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
    return (await this.summary(id, { owner, project: null })) ? "finished" : "unknown";
  }

  /**
   * Fails every job left `running` by a worker that is gone; another
   * process may be running jobs on the same database (a second server on the
   * same embedded `data_dir`, or replicas on one `DATABASE_URL`), and a live
   * worker's job is never touched. A job is taken as orphaned when its lease
   * expired. On a server, also when no connection of its worker is open: a
   * killed process's connections close at once, while a live worker keeps
   * its LISTEN connection, which never idles out. That only when the worker
   * last renewed after the server started: a worker cut off by a database
   * restart has no connection until it renews. The embedded database has no
   * LISTEN connection (idle pool connections close after a minute), so there
   * only a lapsed lease counts; the lease sweep fails the rest when theirs
   * lapse.
   */
  async recover(reason: string): Promise<string[]> {
    const lease = `(${Math.round(this.#leaseMs)} * interval '1 millisecond')`;
    const gone = this.#bus
      ? `OR (lease_expires_at - ${lease} > pg_postmaster_start_time()
             AND NOT EXISTS (SELECT 1 FROM pg_stat_activity
                              WHERE application_name = left('sd15-mcp/' || worker, 63)))`
      : "";
    return await this.#fail(
      `state = 'running' AND (lease_expires_at IS NULL OR lease_expires_at < now() ${gone})`,
      reason,
    );
  }

  async #fail(where: string, reason: string): Promise<string[]> {
    const rows = await this.#db.query<{ id: string }>(
      this.#ttl(
        `UPDATE mcp_generation_jobs SET state = 'failed', error = $1, cancel_requested = false,
            finished_at = now(), expires_at = ${EXPIRES}, input_image = NULL, input_mask = NULL
          WHERE ${where} RETURNING id`,
      ),
      [reason],
    );
    for (const { id } of rows) this.#emit(id, { type: "state", state: "failed" });
    return rows.map((r) => r.id);
  }

  /**
   * Extends the lease of a running job while `claim` holds it and its lease
   * has not lapsed (a lapsed lease is never revived: the sweep of any
   * replica may be ending the job at that moment); reports a cancellation
   * asked for meanwhile.
   */
  async renew(claim: JobClaim): Promise<LeaseRenewal> {
    const [row] = await this.#db.query<{ cancel_requested: boolean }>(
      `UPDATE mcp_generation_jobs SET lease_expires_at = ${this.#lease()}
        WHERE id = $1 AND lease_token = $2 AND state = 'running' AND lease_expires_at > now()
        RETURNING cancel_requested`,
      [claim.id, claim.token],
      // Bounded, so a renewal lost with its connection does not hold up the next one.
      { timeoutMs: Math.max(500, this.#leaseMs / 4) },
    );
    return row
      ? { held: true, cancelRequested: row.cancel_requested }
      : { held: false, cancelRequested: false };
  }

  /**
   * Whether a stop of the running job `claim` holds was asked for in the
   * database (by its owner on another replica, or by the revocation of its
   * key, which any process may write: migration 6); false once the claim no
   * longer holds it.
   */
  async cancelRequested(claim: JobClaim): Promise<boolean> {
    const [row] = await this.#db.query<{ cancel_requested: boolean }>(
      `SELECT cancel_requested FROM mcp_generation_jobs
        WHERE id = $1 AND lease_token = $2 AND state = 'running'`,
      [claim.id, claim.token],
      { timeoutMs: Math.max(500, this.#leaseMs / 4) },
    );
    return row?.cancel_requested === true;
  }

  /** Fails running jobs whose worker stopped renewing their lease. */
  expireLeases(reason: string): Promise<string[]> {
    return this.#fail(`state = 'running' AND lease_expires_at < now()`, reason);
  }

  /** Deletes expired jobs (their items go with them). */
  async purgeExpired(): Promise<number> {
    const rows = await this.#db.query(
      `DELETE FROM mcp_generation_jobs WHERE expires_at <= now() RETURNING id`,
    );
    for (const row of rows) this.#finished.delete(String(row.id));
    return rows.length;
  }

  /** Listens to one job's events in this process. */
  subscribe(id: string, listener: (event: JobEvent) => void): () => void {
    return this.#events.subscribe(id, listener);
  }

  /** Waits for background progress writes and stops listening. */
  async close(): Promise<void> {
    await Promise.allSettled([...this.#writes]);
    await this.#bus?.close();
  }
}
