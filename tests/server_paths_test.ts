/**
 * What a client reads never names a path of the server's: the texts of a
 * saved batch, and a database error that reaches a tool result (its message
 * names the embedded database by its directory). The HTTP server on the
 * embedded default, a real SDK client.
 */

import assert from "node:assert/strict";
import { startApp } from "../mod/app/mod.ts";
import { loadConfig } from "../mod/config/mod.ts";
import { openDatabase } from "../mod/db/mod.ts";
import { createTestKey } from "./helpers/log_secrets.ts";
import { connectHttp } from "./helpers/http_client.ts";
import { ROOT } from "./helpers/paths.ts";
import { texts } from "./helpers/results.ts";
import { writeTinyConfig } from "./helpers/tiny_config.ts";

/** Fails when `text` holds one of `prefixes`, or anything that looks like an absolute path. */
function assertNoServerPath(text: string, prefixes: readonly string[], what: string): void {
  for (const prefix of prefixes) {
    assert.ok(!text.includes(prefix), `${what} names ${prefix}: ${text}`);
  }
  // An absolute path starts a word: after a space, a quote, a bracket or "=".
  assert.doesNotMatch(text, /(^|[\s'"`(\[=])\/[\w.]/, `${what} holds an absolute path: ${text}`);
}

Deno.test({
  name: "tool texts and database errors name no absolute server path",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const temp = await writeTinyConfig(
      `[generation]\nseed = 7\nsteps = 2\n[output]\nsave = true\ndir = "saved"\n`,
    );
    const config = await loadConfig({ path: temp.path, overrides: { transport: "http" }, env: {} });
    const cluster = `${config.server.dataDir}/postgres`;
    const prefixes = [temp.dir, Deno.realPathSync(temp.dir), ROOT, "/tmp/"];
    const app = await startApp(config);
    const keys = await openDatabase({ embeddedDir: cluster, maxConnections: 1 });
    const { key } = await createTestKey(keys, { projectId: 1, userId: 1, permission: "write" });
    await keys.close();
    const client = await connectHttp(app.http!.port, { "MCP-API-Key": key });
    try {
      await t.step("a saved batch names its files under output.dir", async () => {
        const batch = await client.callTool({
          name: "generate_image",
          arguments: { positive_prompt: "a fox", name: "fox", count: 2 },
        });
        const text = texts(batch);
        assert.equal(batch.isError, undefined, text);
        assert.match(
          text,
          /\[1\/2\] seed 7, .*saved to output\.dir\/fox_\d{8}_\d{6}_7(-\d+)?\.png/,
        );
        assertNoServerPath(text, prefixes, "generate_image");
        const listed = await client.callTool({ name: "list_generations", arguments: {} });
        assertNoServerPath(texts(listed), prefixes, "list_generations");
      });

      await t.step("a database error in a tool result says server.data_dir", async () => {
        // An SQL error after authentication: the job table is gone for a moment.
        const admin = await openDatabase({ embeddedDir: cluster, maxConnections: 1 });
        try {
          await admin.query("ALTER TABLE mcp_generation_jobs RENAME TO mcp_generation_jobs_away");
          const listed = await client.callTool({ name: "list_generations", arguments: {} });
          const failure = texts(listed);
          assert.equal(listed.isError, true, failure);
          console.error(`the client read: ${failure}`);
          assert.match(
            failure,
            /database error \(embedded PostgreSQL server\.data_dir\/postgres\)/,
          );
          assertNoServerPath(failure, prefixes, "list_generations");
        } finally {
          await admin.query("ALTER TABLE mcp_generation_jobs_away RENAME TO mcp_generation_jobs");
          await admin.close();
        }
      });
    } finally {
      await client.close();
      await app.shutdown();
      await temp.remove();
    }
  },
});
