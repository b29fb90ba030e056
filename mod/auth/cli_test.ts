/**
 * `deno task keys` round trip, run as a subprocess exactly as a user would:
 * create → authenticate → list → revoke → delete.
 */
import { deepStrictEqual, match, ok, strictEqual } from "node:assert";
import { openDatabase } from "../db/mod.ts";
import { makeReachableTempDir, openTestDatabase } from "../../tests/helpers/postgres.ts";
import { type KeysRun, runKeysCli } from "../../tests/helpers/keys_cli.ts";
import { API_KEY_PATTERN } from "./api_key.ts";
import { createAuthenticator } from "./authenticator.ts";

function keys(args: string[], env: Record<string, string>): Promise<KeysRun> {
  return runKeysCli(args, { env });
}

function lastLine(text: string): string {
  const lines = text.trimEnd().split("\n");
  return lines[lines.length - 1];
}

/** The `keys list` row for `prefix`, split on runs of spaces. */
function listRow(stdout: string, prefix: string): string[] {
  const line = stdout.split("\n").find((l) => l.startsWith(prefix + " "));
  ok(line, `no list row for ${prefix} in:\n${stdout}`);
  return line.split(/ {2,}/);
}

Deno.test({
  name: "keys CLI round trip",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const test = await openTestDatabase("keys_cli");
    const env = { DATABASE_URL: test.url };
    const auth = createAuthenticator({
      db: test.db,
      environment: "local",
      cacheTtlMs: 60_000,
      lastUsedIntervalMs: 60_000,
      dbTimeoutMs: 5_000,
    });
    const check = (key: string) =>
      auth.authenticate(new Request("http://x/mcp", { headers: { "MCP-API-Key": key } }));
    try {
      let key = "";
      let prefix = "";

      await t.step(
        "create prints the key once, alone on the last line, and it authenticates",
        async () => {
          const run = await keys(
            [
              "create",
              "--project",
              "42",
              "--user=7",
              "--permission",
              "write",
              "--name",
              "ci key",
              "--expires",
              "2099-01-01T00:00:00Z",
            ],
            env,
          );
          strictEqual(run.code, 0, run.stderr);
          key = lastLine(run.stdout);
          const parts = API_KEY_PATTERN.exec(key);
          ok(parts, `last line is not a key: ${key}`);
          prefix = parts[1];
          ok(parts[2].length >= 32);
          strictEqual(run.stdout.split(key).length, 2, "the key is printed exactly once");
          ok(!run.stderr.includes(parts[2]), "the secret is not on stderr");
          const outcome = await check(key);
          deepStrictEqual(outcome, {
            ok: true,
            scope: { keyPrefix: prefix, projectId: 42, userId: 7, permission: "write" },
          });
          const [row] = await test.db.query<{ name: string; expires_at: Date }>(
            "SELECT name, expires_at FROM mcp_api_keys WHERE key_prefix = $1",
            [prefix],
          );
          strictEqual(row.name, "ci key");
          strictEqual(row.expires_at.toISOString(), "2099-01-01T00:00:00.000Z");
        },
      );

      await t.step("list shows the key's metadata and state, never a secret or hash", async () => {
        await auth.settle();
        const run = await keys(["list"], env);
        strictEqual(run.code, 0, run.stderr);
        const row = listRow(run.stdout, prefix);
        deepStrictEqual([row[1], row[2], row[3], row[4], row[8]], [
          "ci key",
          "42",
          "7",
          "write",
          "active",
        ]);
        match(row[6], /^\d{4}-\d\d-\d\dT/, "last used is shown after the key was used");
        const [stored] = await test.db.query<{ key_hash: string; salt: string }>(
          "SELECT key_hash, salt FROM mcp_api_keys WHERE key_prefix = $1",
          [prefix],
        );
        for (
          const secret of [key, key.slice(key.lastIndexOf("_") + 1), stored.key_hash, stored.salt]
        ) {
          ok(!run.stdout.includes(secret) && !run.stderr.includes(secret), "list leaked a secret");
        }
        ok(!run.stdout.includes(test.password) && !run.stderr.includes(test.password));
      });

      await t.step("revoke: the next request is refused", async () => {
        ok((await check(key)).ok, "cached and valid before the revocation");
        const run = await keys(["revoke", prefix], env);
        strictEqual(run.code, 0, run.stderr);
        match(run.stdout, new RegExp(`API key ${prefix} revoked`));
        const outcome = await check(key);
        ok(!outcome.ok && outcome.status === 401 && outcome.message === "API key revoked");
        strictEqual(listRow((await keys(["list"], env)).stdout, prefix)[8], "revoked");
        const again = await keys(["revoke", prefix], env);
        strictEqual(again.code, 1, "nothing matched: non-zero");
        match(again.stderr, /already revoked/);
      });

      await t.step(
        "delete is soft: the row stays, listed as deleted, and the key is unknown",
        async () => {
          const run = await keys(["delete", prefix], env);
          strictEqual(run.code, 0, run.stderr);
          strictEqual(listRow((await keys(["list"], env)).stdout, prefix)[8], "deleted");
          const [row] = await test.db.query<{ deleted: boolean }>(
            "SELECT deleted_at IS NOT NULL AS deleted FROM mcp_api_keys WHERE key_prefix = $1",
            [prefix],
          );
          strictEqual(row.deleted, true);
          const outcome = await check(key);
          ok(!outcome.ok && outcome.status === 401 && outcome.message === "invalid API key");
        },
      );

      await t.step(
        "mistakes: unknown prefix exits 1, bad arguments exit 2 before touching the database",
        async () => {
          const unknown = await keys(["revoke", "NoSuchPrefix"], env);
          strictEqual(unknown.code, 1);
          match(unknown.stderr, /no API key with prefix NoSuchPrefix/);
          const unreachable = { DATABASE_URL: "postgres://nobody:pw@127.0.0.1:1/none" };
          for (
            const [args, pattern] of [
              [
                ["create", "--project", "42", "--user", "7"],
                /--permission read or --permission write/,
              ],
              [
                ["create", "--project", "x", "--user", "7", "--permission", "read"],
                /--project must be a positive integer/,
              ],
              [[
                "create",
                "--project",
                "1",
                "--user",
                "1",
                "--permission",
                "read",
                "--expires",
                "2000-01-01",
              ], /must be in the future/],
              [[
                "create",
                "--project",
                "1",
                "--user",
                "1",
                "--permission",
                "read",
                "--expires",
                "tomorrow",
              ], /ISO 8601/],
              [["revoke", key], /prefix .*not the full key/],
              [["frobnicate"], /unknown command "frobnicate"/],
            ] as const
          ) {
            const run = await keys([...args], unreachable);
            strictEqual(run.code, 2, `${args.join(" ")}: ${run.stderr}`);
            match(run.stderr, pattern);
            ok(
              !run.stderr.includes(key.slice(key.lastIndexOf("_") + 1)),
              "a usage error echoed the secret",
            );
          }
          const down = await keys(["list"], unreachable);
          strictEqual(down.code, 1);
          match(down.stderr, /database unavailable/);
          ok(!down.stderr.includes(":pw@"), "the DSN password is redacted");
        },
      );

      await t.step(
        "with the embedded default, the CLI joins the running server's database",
        async () => {
          const dir = await makeReachableTempDir("sdmcp-cli-");
          // This process owns the cluster, as the HTTP server would.
          const server = await openDatabase({ embeddedDir: `${dir}/postgres` });
          try {
            const embeddedEnv = { DATABASE_URL: "", SD_MCP_DATA_DIR: `${dir}/postgres` };
            const created = await keys([
              "create",
              "--project",
              "none",
              "--user",
              "none",
              "--permission",
              "read",
            ], embeddedEnv);
            strictEqual(created.code, 0, created.stderr);
            const shared = API_KEY_PATTERN.exec(lastLine(created.stdout));
            ok(shared);
            const rows = await server.query(
              "SELECT project_id, permission FROM mcp_api_keys WHERE key_prefix = $1",
              [
                shared[1],
              ],
            );
            deepStrictEqual(rows, [{ project_id: null, permission: "read" }]);
            strictEqual(
              listRow(
                (await keys(["list", "--data-dir", `${dir}/postgres`], { DATABASE_URL: "" }))
                  .stdout,
                shared[1],
              )[2],
              "any",
            );
          } finally {
            await server.close();
            await Deno.remove(dir, { recursive: true });
          }
        },
      );
    } finally {
      await auth.close();
      await test.close();
    }
  },
});
