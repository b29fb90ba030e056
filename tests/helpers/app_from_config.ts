/**
 * Starts the server in-process over HTTP, as the end-to-end tests that
 * drive it with the SDK client need it: the config file, the database.
 *
 * @module
 */

import { type App, startApp } from "../../mod/app/mod.ts";
import { loadConfig } from "../../mod/config/mod.ts";

/** Starts the app from `configPath` over HTTP on the PostgreSQL at `databaseUrl`. */
export async function startAppFromConfig(configPath: string, databaseUrl: string): Promise<App> {
  const config = await loadConfig({
    path: configPath,
    overrides: { transport: "http" },
    env: { DATABASE_URL: databaseUrl },
  });
  return await startApp(config);
}
