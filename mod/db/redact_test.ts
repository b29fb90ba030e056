import { strictEqual } from "node:assert";
import { databaseUrlPassword, hidePaths, redactDatabaseUrl, scrubSecrets } from "./redact.ts";

Deno.test("redactDatabaseUrl hides the password and drops the query string", () => {
  strictEqual(
    redactDatabaseUrl("postgres://app:p%40ss@db.example:5433/main?sslmode=require&password=x"),
    "postgres://app:***@db.example:5433/main",
  );
  strictEqual(redactDatabaseUrl("postgresql://app@db/main"), "postgresql://app@db/main");
  strictEqual(redactDatabaseUrl("postgres://:only@db/main"), "postgres://***@db/main");
  strictEqual(redactDatabaseUrl("not a url with secret"), "<unparseable database URL>");
});

Deno.test("databaseUrlPassword decodes the password", () => {
  strictEqual(databaseUrlPassword("postgres://app:p%40ss@db/main"), "p@ss");
  strictEqual(databaseUrlPassword("postgres://app@db/main"), undefined);
});

Deno.test("scrubSecrets replaces raw and percent-encoded forms", () => {
  strictEqual(scrubSecrets("a p@ss b p%40ss c", ["p@ss"]), "a *** b *** c");
  strictEqual(scrubSecrets("nothing here", [undefined, ""]), "nothing here");
});

Deno.test("hidePaths names known paths by their label and blanks any other absolute path", () => {
  const known = [["/srv/app/.data", "server.data_dir"], ["/tmp/sdmcp-pg-x1", "<socket>"]] as const;
  strictEqual(
    hidePaths(
      "database unavailable (embedded PostgreSQL /srv/app/.data/postgres): embedded database at " +
        "/tmp/sdmcp-pg-x1/.s.PGSQL.5432 is unreachable: connect ENOENT /tmp/sdmcp-pg-x1/.s.PGSQL.5432",
      known,
    ),
    "database unavailable (embedded PostgreSQL server.data_dir/postgres): embedded database at " +
      "<socket>/.s.PGSQL.5432 is unreachable: connect ENOENT <socket>/.s.PGSQL.5432",
  );
  strictEqual(
    hidePaths(
      `could not open file "/var/lib/x/pg_wal/0001": No space left; EACCES: open '/etc/a b', at /opt/y.`,
      known,
    ),
    `could not open file "…": No space left; EACCES: open '…', at ….`,
  );
  strictEqual(hidePaths("/abs/start: bad", []), "…: bad");
  // Not paths: a DSN, a ratio, a relative path, a key/value.
  const untouched = "postgres://app:***@db:5433/main 1/2 pg_wal/0001 key/value output.dir/a.png";
  strictEqual(hidePaths(untouched, known), untouched);
});
