/**
 * The database: the {@link Database} interface, {@link openDatabase} (a
 * PostgreSQL server or the embedded PostgreSQL default), migrations, a bounded
 * health probe and URL
 * redaction. postgres.js is imported only by `postgres.ts`.
 *
 * @module
 */

export {
  type Database,
  DatabaseError,
  type Listening,
  type Queryable,
  type QueryOptions,
  type Row,
  type SqlParam,
  type TransactionOptions,
} from "./database.ts";
export { type EmbeddedEndpoint, type EmbeddedOptions, EmbeddedPostgres } from "./embedded.ts";
export { type EmbeddedBinaries } from "./runner.ts";
export { type DatabaseHealth, type DatabaseProbe, probeDatabase } from "./health.ts";
export { migrate, type Migration, MIGRATIONS } from "./migrations.ts";
export { openDatabase, type OpenDatabaseOptions } from "./open.ts";
export { databaseUrlPassword, redactDatabaseUrl, scrubSecrets } from "./redact.ts";
