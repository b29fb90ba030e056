/**
 * The app started in-process over HTTP on port 0 with the tiny models, a
 * fresh test database (`DATABASE_URL`'s server or the embedded default) and
 * a write and a read API key.
 *
 * @module
 */

import type { App } from "../../mod/app/mod.ts";
import { createTestKey } from "./log_secrets.ts";
import { openTestDatabase } from "./postgres.ts";
import { writeTinyConfig } from "./tiny_config.ts";
import { startAppFromConfig } from "./app_from_config.ts";

/** A running HTTP app and its keys. */
export interface HttpApp {
  app: App;
  port: number;
  writeKey: string;
  readKey: string;
  /** Stops the app and removes its database and config. */
  close(): Promise<void>;
}

/** Starts the app with `sections` (TOML, see {@link writeTinyConfig}); `label` names the database. */
export async function startHttpApp(label: string, sections = ""): Promise<HttpApp> {
  const tdb = await openTestDatabase(label);
  const write = await createTestKey(tdb.db, { projectId: 1, userId: 1, permission: "write" });
  const read = await createTestKey(tdb.db, { projectId: 1, userId: 1, permission: "read" });
  const temp = await writeTinyConfig(sections);
  const app = await startAppFromConfig(temp.path, tdb.url);
  return {
    app,
    port: app.http!.port,
    writeKey: write.key,
    readKey: read.key,
    async close() {
      await app.shutdown();
      await tdb.close();
      await temp.remove();
    },
  };
}
