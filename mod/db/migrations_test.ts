import { deepStrictEqual, ok, rejects, strictEqual } from "node:assert";
import { openTestDatabase } from "../../tests/helpers/postgres.ts";
import { migrate, MIGRATIONS } from "./migrations.ts";

// One database per file (a cluster start costs a second); steps share it.
Deno.test({
  name: "migrations",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const test = await openTestDatabase("migrations");
    const { db } = test;
    try {
      await t.step("opening applied every migration once and recorded it", async () => {
        const rows = await db.query<{ version: number; name: string }>(
          "SELECT version, name FROM schema_migrations ORDER BY version",
        );
        deepStrictEqual(
          rows.map((r) => [Number(r.version), r.name]),
          MIGRATIONS.map((m) => [m.version, m.name]),
        );
      });

      await t.step("migrate is idempotent, also when run concurrently", async () => {
        const other = await test.connect({ migrate: false, maxConnections: 2 });
        const results = await Promise.all([migrate(db), migrate(other), migrate(db)]);
        deepStrictEqual(results, [[], [], []]);
        const count = await db.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM schema_migrations",
        );
        strictEqual(count[0].n, MIGRATIONS.length);
      });

      await t.step(
        "a new migration is applied exactly once, in order, even when raced",
        async () => {
          const extra = [...MIGRATIONS, {
            version: 1000,
            name: "test only",
            statements: ["CREATE TABLE test_only_1000 (id integer)"],
          }];
          const other = await test.connect({ migrate: false, maxConnections: 1 });
          const results = await Promise.all([migrate(db, extra), migrate(other, extra)]);
          deepStrictEqual(results.flat(), [1000], "exactly one of the two applies it");
          const rows = await db.query("SELECT 1 FROM schema_migrations WHERE version = 1000");
          strictEqual(rows.length, 1);
        },
      );

      await t.step("mcp_api_keys has the contract's columns", async () => {
        const rows = await db.query<
          { column_name: string; data_type: string; is_nullable: string }
        >(
          `SELECT column_name, data_type, is_nullable FROM information_schema.columns
            WHERE table_name = 'mcp_api_keys' ORDER BY column_name`,
        );
        const columns = Object.fromEntries(
          rows.map((r) => [r.column_name, [r.data_type, r.is_nullable]]),
        );
        deepStrictEqual(columns, {
          created_at: ["timestamp with time zone", "NO"],
          deleted_at: ["timestamp with time zone", "YES"],
          expires_at: ["timestamp with time zone", "YES"],
          id: ["bigint", "NO"],
          key_hash: ["text", "NO"],
          key_prefix: ["text", "NO"],
          last_used_at: ["timestamp with time zone", "YES"],
          name: ["text", "YES"],
          permission: ["text", "NO"],
          project_id: ["bigint", "YES"],
          revoked_at: ["timestamp with time zone", "YES"],
          salt: ["text", "NO"],
          user_id: ["bigint", "YES"],
        });
      });

      await t.step("key_prefix is unique and indexed; permission is read or write", async () => {
        const indexes = await db.query<{ indexdef: string }>(
          "SELECT indexdef FROM pg_indexes WHERE tablename = 'mcp_api_keys'",
        );
        ok(
          indexes.some((i) =>
            /UNIQUE INDEX .* ON .*mcp_api_keys .*\(key_prefix\)/.test(i.indexdef)
          ),
          JSON.stringify(indexes),
        );
        const insert =
          "INSERT INTO mcp_api_keys (key_prefix, key_hash, salt, permission) VALUES ($1, 'h', 's', $2)";
        await db.query(insert, ["dupPrefix", "read"]);
        await rejects(
          db.query(insert, ["dupPrefix", "write"]),
          (e: Error & { code?: string }) => e.code === "23505",
        );
        await rejects(
          db.query(insert, ["otherPrefix", "admin"]),
          (e: Error & { code?: string }) => e.code === "23514",
        );
      });

      await t.step("versions must increase", async () => {
        await rejects(
          migrate(db, [MIGRATIONS[0], MIGRATIONS[0]]),
          /migration versions must increase: 1 is followed by 1/,
        );
      });
    } finally {
      await test.close();
    }
  },
});
