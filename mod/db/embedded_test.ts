import { ok, strictEqual } from "node:assert";
import { openDatabase } from "./open.ts";

/** Port the owner published in the lock file. */
async function lockPort(dir: string): Promise<number> {
  return JSON.parse(await Deno.readTextFile(`${dir}.lock`)).port;
}

// The embedded default is tested on its own, whatever DATABASE_URL says.
Deno.test({
  name: "embedded PGlite default",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const root = await Deno.makeTempDir({ prefix: "sdmcp-embedded-" });
    const dir = `${root}/nested/pglite`;
    try {
      await t.step("opens, migrates and keeps data across a restart", async () => {
        const db = await openDatabase({ embeddedDir: dir });
        strictEqual(db.kind, "embedded");
        ok(db.target.includes(dir));
        await db.query(
          "INSERT INTO mcp_api_keys (key_prefix, key_hash, salt, permission) VALUES ('persisted', 'h', 's', 'read')",
        );
        await db.close();
        const again = await openDatabase({ embeddedDir: dir });
        const rows = await again.query("SELECT key_prefix FROM mcp_api_keys");
        strictEqual(rows.length, 1);
        strictEqual(rows[0].key_prefix, "persisted");
        await again.close();
      });

      await t.step(
        "a second opener shares the owner's server and takes over when it closes",
        async () => {
          const owner = await openDatabase({ embeddedDir: dir });
          const ownerPort = await lockPort(dir);
          const guest = await openDatabase({ embeddedDir: dir });
          strictEqual(await lockPort(dir), ownerPort, "the guest did not start a second server");
          await owner.query(
            "INSERT INTO mcp_api_keys (key_prefix, key_hash, salt, permission) VALUES ('shared', 'h', 's', 'write')",
          );
          strictEqual(
            (await guest.query("SELECT 1 FROM mcp_api_keys WHERE key_prefix = 'shared'")).length,
            1,
          );

          await owner.close();
          // The guest's connections die with the owner; its next connections take the directory over.
          let rows: unknown[] = [];
          for (let i = 0; i < 100 && rows.length === 0; i++) {
            rows = await guest.query("SELECT key_prefix FROM mcp_api_keys ORDER BY key_prefix")
              .catch(() => []);
            if (rows.length === 0) await new Promise((r) => setTimeout(r, 100));
          }
          strictEqual(rows.length, 2, "both rows survive the hand-over");
          ok((await lockPort(dir)) !== ownerPort, "the guest now runs the server");
          await guest.close();
        },
      );
    } finally {
      await Deno.remove(root, { recursive: true });
    }
  },
});
