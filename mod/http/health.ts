/**
 * `/healthz` answers, shared by every replica role: 200 with `status: "ok"`
 * when the server can serve, else 503 with `status: "unavailable"` and the
 * reason, so that load balancers and orchestrators take a replica out while
 * it cannot serve instead of sending it requests that fail. While the
 * database is unavailable nothing can be served: every `/mcp` request needs
 * its API key row (revocation is read per request), and jobs live there.
 *
 * @module
 */

/**
 * What `/healthz` reports besides `status`. `unavailable`, when set, says
 * why the server cannot serve now: the answer is then 503 with
 * `status: "unavailable"` and that text as `reason`.
 */
export type HealthFields = Record<string, unknown> & { unavailable?: string };

/** The reason `/healthz` gives while the database does not answer. */
export const DATABASE_UNAVAILABLE: string =
  "the database is unavailable (a SELECT 1 bounded to 1 s failed or timed out): API keys " +
  "cannot be checked nor jobs stored until it answers again";

/** `fields` with `database` set, and {@link DATABASE_UNAVAILABLE} when it is not "ok". */
export function withDatabase(
  database: "ok" | "unavailable",
  fields: Record<string, unknown>,
): HealthFields {
  return database === "ok"
    ? { ...fields, database }
    : { ...fields, database, unavailable: DATABASE_UNAVAILABLE };
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
