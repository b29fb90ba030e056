import { strictEqual } from "node:assert";
import { databaseUrlPassword, redactDatabaseUrl, scrubSecrets } from "./redact.ts";

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
