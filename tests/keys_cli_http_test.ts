/**
 * The operator's path: a key made with `deno task keys create` works over
 * HTTP with the SDK client, and the request after `keys revoke` is refused.
 */

import assert from "node:assert/strict";
import { startApp } from "../mod/app/mod.ts";
import { loadConfig } from "../mod/config/mod.ts";
import { connectHttp } from "./helpers/http_client.ts";
import { openTestDatabase } from "./helpers/postgres.ts";
import { writeTinyConfig } from "./helpers/tiny_config.ts";
import { registerPrintedKey, teeChildLog } from "./helpers/log_secrets.ts";
import { runKeysCli } from "./helpers/keys_cli.ts";
import { IMAGE_TOOL_NAMES } from "./helpers/tool_names.ts";
import { startAppFromConfig } from "./helpers/app_from_config.ts";

async function keys(databaseUrl: string, ...args: string[]): Promise<string> {
  const output = await runKeysCli(args, { env: { DATABASE_URL: databaseUrl }, quiet: true });
  registerPrintedKey(output.stdout);
  teeChildLog(`keys ${args[0]}`, output.stderr);
  assert.equal(output.code, 0, output.stderr);
  return output.stdout;
}

Deno.test("a CLI-created key works over HTTP and stops working after keys revoke", async () => {
  const tdb = await openTestDatabase("keys_cli_http");
  const temp = await writeTinyConfig();
  try {
    const created = await keys(
      tdb.url,
      "create",
      "--project",
      "42",
      "--user",
      "7",
      "--permission",
      "write",
      "--name",
      "e2e",
    );
    const key = created.trim().split("\n").at(-1)!;
    assert.match(key, /^guinness_[A-Za-z0-9]+_[A-Za-z0-9]{32,}$/);
    const prefix = key.split("_")[1];

    const app = await startAppFromConfig(temp.path, tdb.url);
    try {
      const client = await connectHttp(app.http!.port, { authorization: `Bearer ${key}` });
      assert.equal((await client.listTools()).tools.length, IMAGE_TOOL_NAMES.length);
      const listing = await keys(tdb.url, "list");
      assert.ok(listing.includes(prefix));
      assert.ok(!listing.includes(key), "list must never show a secret");

      await keys(tdb.url, "revoke", prefix);
      await assert.rejects(client.listTools(), /401|revoked/i);
      await client.close().catch(() => {});
    } finally {
      await app.shutdown();
    }
  } finally {
    await tdb.close();
    await temp.remove();
  }
});

Deno.test("with no DATABASE_URL, keys --config writes where the server reads (embedded)", async () => {
  const temp = await writeTinyConfig();
  try {
    const output = await runKeysCli(
      [
        "create",
        "--config",
        temp.path,
        "--project",
        "none",
        "--user",
        "1",
        "--permission",
        "write",
      ],
      { clearEnv: true, quiet: true },
    );
    const key = registerPrintedKey(output.stdout);
    teeChildLog("keys create --config", output.stderr);
    assert.equal(output.code, 0, output.stderr);
    const config = await loadConfig({ path: temp.path, overrides: { transport: "http" }, env: {} });
    assert.equal(config.auth.databaseUrl, undefined);
    const app = await startApp(config);
    try {
      const client = await connectHttp(app.http!.port, { "MCP-API-Key": key });
      assert.equal((await client.listTools()).tools.length, IMAGE_TOOL_NAMES.length);
      await client.close();
    } finally {
      await app.shutdown();
    }
  } finally {
    await temp.remove();
  }
});
