/**
 * `/healthz` answers, shared by every replica role: 200 with `status: "ok"`
 * when the server can serve, else 503 with `status: "unavailable"` and the
 * reason, so that load balancers and orchestrators take a replica out while
 * it cannot serve instead of sending it requests that fail. While the
 * database is unavailable nothing can be served: every `/mcp` request needs
 * its API key row (revocation is read per request), and jobs live there.
 *
 * A stalled database (a stopped server process, a frozen disk or VM, a
 * network path that stopped forwarding) answers nothing at all, neither an
 * error nor a closed connection, so every read here has a bound: the answer
 * comes within `auth.db_timeout_ms` (see {@link gatherHealth}) whatever the
 * database does. Probes of load balancers (1–5 s timeouts) then read a 503
 * instead of piling up as open connections.
 *
 * @module
 */

/**
 * What `/healthz` reports besides `status`. `unavailable`, when set, says
 * why the server cannot serve now: the answer is then 503 with
 * `status: "unavailable"` and that text as `reason`.
 */
export type HealthFields = Record<string, unknown> & { unavailable?: string };

/** The database's part of `/healthz`, as a bounded probe found it (`probeDatabase`). */
export type DatabaseState =
  | { database: "ok" }
  | { database: "unavailable"; timedOut: boolean };

/** What a client cannot do while the database is unavailable, the end of every reason. */
const CONSEQUENCE = "API keys cannot be checked nor jobs stored until it answers again";

/**
 * The reason `/healthz` gives while the database does not answer within
 * `timeoutMs` (`timedOut`: a stall), or refuses (down, unreachable).
 */
export function databaseUnavailableReason(timedOut: boolean, timeoutMs: number): string {
  return timedOut
    ? `the database is unavailable (no answer to a SELECT 1 within ${timeoutMs} ms, ` +
      `auth.db_timeout_ms: it is stalled or unreachable): ${CONSEQUENCE}`
    : `the database is unavailable (a SELECT 1 failed: it is down or refused the connection): ` +
      CONSEQUENCE;
}

/** The reason `/healthz` gives while the database refuses (down, unreachable). */
export const DATABASE_UNAVAILABLE: string = databaseUnavailableReason(false, 0);

/**
 * `fields` with `database` set, and the reason when it is not "ok"
 * (`"unavailable"` alone: the database refused; a timed-out probe names
 * `timeoutMs`).
 */
export function withDatabase(
  state: DatabaseState | DatabaseState["database"],
  fields: Record<string, unknown>,
  timeoutMs = 0,
): HealthFields {
  const probe: DatabaseState = typeof state === "string"
    ? (state === "ok" ? { database: "ok" } : { database: "unavailable", timedOut: false })
    : state;
  return probe.database === "ok" ? { ...fields, database: "ok" } : {
    ...fields,
    database: "unavailable",
    unavailable: databaseUnavailableReason(probe.timedOut, timeoutMs),
  };
}

/** Options of {@link gatherHealth}. */
export interface GatherHealthOptions {
  /** `auth.db_timeout_ms`: the bound on the whole answer's database reads. */
  timeoutMs: number;
  /** The database probe, bounded to `timeoutMs` itself (`probeDatabase`). */
  probe: () => Promise<DatabaseState>;
  /** The other fields (queue numbers read from the database with the same bound, the role…). */
  fields: () => Promise<Record<string, unknown>>;
}

/** How long past `timeoutMs` the answer may take before the fields are left out (timer jitter). */
const SLACK_MS = 100;

/**
 * The `/healthz` fields within `timeoutMs` (plus {@link SLACK_MS}): the probe
 * and the other fields are read at once, and whatever has not answered by
 * then counts as a stalled database. The other fields' reads carry the same
 * bound, so this deadline is a backstop, not the usual path.
 */
export async function gatherHealth(options: GatherHealthOptions): Promise<HealthFields> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<"late">((resolve) => {
    timer = setTimeout(() => resolve("late"), options.timeoutMs + SLACK_MS);
  });
  const stalled: DatabaseState = { database: "unavailable", timedOut: true };
  try {
    const [state, fields] = await Promise.all([
      Promise.race([options.probe().catch(() => stalled), late]),
      Promise.race([options.fields().catch(() => "late" as const), late]),
    ]);
    return withDatabase(
      state === "late" ? stalled : state,
      fields === "late" ? {} : fields,
      options.timeoutMs,
    );
  } finally {
    clearTimeout(timer);
  }
}

/** The `/healthz` response for `fields`: 200 `ok`, or 503 with the reason. */
export function healthResponse(fields: HealthFields): Response {
  const { unavailable, ...rest } = fields;
  if (unavailable === undefined) return Response.json({ status: "ok", ...rest });
  return Response.json({ status: "unavailable", reason: unavailable, ...rest }, {
    status: 503,
    headers: { "retry-after": "5" },
  });
}
