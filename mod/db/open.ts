/**
 * Opening the database: `DATABASE_URL` when given, else the embedded
 * PostgreSQL default; then the schema migrations. postgres.js is the only client either
 * way.
 *
 * @module
 */

import type { Database } from "./database.ts";
import { EmbeddedPostgres } from "./embedded.ts";
import { migrate } from "./migrations.ts";
import { connectPostgres } from "./postgres.ts";
import { databaseUrlPassword, redactDatabaseUrl } from "./redact.ts";
import { log } from "../log/mod.ts";

/** Options for {@link openDatabase}. */
export interface OpenDatabaseOptions {
  /** A PostgreSQL DSN (`DATABASE_URL`); when absent the embedded database is used. */
  url?: string;
  /** Data directory of the embedded database (used only without `url`). */
  embeddedDir: string;
  /** Apply pending migrations now (default true). */
  migrate?: boolean;
  /** Pool size (default 4). */
  maxConnections?: number;
  /** Seconds to wait for a new connection (default 10). */
  connectTimeoutSeconds?: number;
  /**
   * Upper bound in ms on every statement that sets none of its own: the
   * client stops waiting and the server cancels it (`statement_timeout`,
   * `lock_timeout`). Unset: no bound beyond each query's own `timeoutMs`.
   */
  queryTimeoutMs?: number;
  /** `application_name` of the connections to a server (see {@link connectPostgres}). */
  applicationName?: string;
}

/**
 * Opens the database and applies pending migrations. Rejects (with a message
 * free of the DSN password) when the database cannot be reached or migrated.
 */
export async function openDatabase(options: OpenDatabaseOptions): Promise<Database> {
  let db: Database;
  if (options.url) {
    if (!/^postgres(ql)?:\/\//.test(options.url)) {
      throw new Error(
        `DATABASE_URL must start with postgres:// or postgresql://, got ${
          redactDatabaseUrl(options.url)
        }`,
      );
    }
    db = connectPostgres({
      target: { url: options.url },
      description: redactDatabaseUrl(options.url),
      kind: "server",
      maxConnections: options.maxConnections,
      connectTimeoutSeconds: options.connectTimeoutSeconds,
      queryTimeoutMs: options.queryTimeoutMs,
      applicationName: options.applicationName,
      secrets: [databaseUrlPassword(options.url)],
    });
  } else {
    const embedded = new EmbeddedPostgres(options.embeddedDir);
    let endpoint;
    try {
      endpoint = await embedded.endpoint();
    } catch (error) {
      await embedded.close();
      throw error;
    }
    db = connectPostgres({
      // Every connection goes through connect(), which restarts or takes over
      // the server when it is gone.
      target: {
        socket: () => embedded.connect(),
        user: endpoint.user,
        database: endpoint.database,
        password: endpoint.password,
      },
      description: `embedded PostgreSQL ${embedded.dataDir}`,
      kind: "embedded",
      maxConnections: options.maxConnections,
      connectTimeoutSeconds: options.connectTimeoutSeconds,
      queryTimeoutMs: options.queryTimeoutMs,
      secrets: [endpoint.password],
      paths: () => embedded.paths(),
      onClose: () => embedded.close(),
    });
  }
  if (options.migrate ?? true) {
    try {
      const applied = await migrate(db);
      if (applied.length > 0) {
        log("info", "db", "applied migrations", { versions: applied, target: db.target });
      }
    } catch (error) {
      await db.close().catch(() => {});
      throw error;
    }
  }
  log("info", "db", "database ready", { target: db.target });
  return db;
}
