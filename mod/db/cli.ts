/**
 * `deno task migrate`: applies pending schema migrations to `DATABASE_URL`,
 * or to the embedded database the server uses (`--data-dir DIR`, else
 * `$SD_MCP_DATA_DIR`, else `<server.data_dir>/postgres` of `--config PATH` /
 * `$SD_MCP_CONFIG` / `./config.toml`), and reports the schema version.
 * The server applies the same migrations at start-up; this is for deploying
 * the schema ahead of it.
 *
 * @module
 */

import { type Help, printHelp, usageText, wantsHelp } from "../cli/mod.ts";
import { defaultConfigPath, embeddedDatabaseDir } from "../config/mod.ts";
import { setLogLevel } from "../log/mod.ts";
import { migrate, MIGRATIONS } from "./migrations.ts";
import { openDatabase } from "./open.ts";
import type { Database } from "./database.ts";

const encoder = new TextEncoder();

const HELP: Help = {
  usage: ["deno task migrate [--config PATH] [--data-dir DIR]"],
  summary: "Applies the pending database schema migrations and prints the schema version. The " +
    "server applies the same migrations at start-up (under an advisory lock, so replicas " +
    "starting together apply each once); this is for deploying the schema ahead of it.",
  options: [
    [
      "--config PATH",
      "the config whose [server] data_dir holds the embedded database (default: " +
      "$SD_MCP_CONFIG, else ./config.toml when present)",
    ],
    [
      "--data-dir DIR",
      "the embedded database's folder (default: $SD_MCP_DATA_DIR, else " +
      "<server.data_dir>/postgres of the config)",
    ],
    ["-h, --help", "print this help and exit"],
  ],
  notes: [
    "Database: DATABASE_URL when set, else the embedded database the server uses. Exit status: " +
    "0 up to date, 1 the database failed, 2 a command-line mistake.",
  ],
};

/** Runs the migrate command with `args`; returns the exit status. */
export async function main(args: readonly string[]): Promise<number> {
  if (wantsHelp(args)) return printHelp(HELP);
  if (!Deno.env.get("SD_MCP_LOG_LEVEL")) setLogLevel("warn");
  let dataDir = Deno.env.get("SD_MCP_DATA_DIR") || undefined;
  let configPath: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === "--data-dir" && args[i + 1] !== undefined) dataDir = args[++i];
    else if (arg.startsWith("--data-dir=")) dataDir = arg.slice("--data-dir=".length);
    else if (arg === "--config" && args[i + 1] !== undefined) configPath = args[++i];
    else if (arg.startsWith("--config=")) configPath = arg.slice("--config=".length);
    else {
      Deno.stderr.writeSync(
        encoder.encode(`migrate: unknown argument "${arg}"\n${usageText(HELP)}\n`),
      );
      return 2;
    }
  }
  let db: Database | undefined;
  try {
    db = await openDatabase({
      url: Deno.env.get("DATABASE_URL") || undefined,
      // The server's embedded database unless told otherwise (see mod/auth/cli.ts).
      embeddedDir: dataDir ?? await embeddedDatabaseDir(configPath ?? await defaultConfigPath()),
      migrate: false,
      maxConnections: 1,
    });
    const applied = await migrate(db);
    const latest = MIGRATIONS[MIGRATIONS.length - 1].version;
    const what = applied.length > 0 ? `applied ${applied.join(", ")}` : "already up to date";
    Deno.stdout.writeSync(encoder.encode(`${db.target}: schema version ${latest} (${what})\n`));
    return 0;
  } catch (error) {
    // DatabaseError messages carry no DSN password.
    Deno.stderr.writeSync(
      encoder.encode(`migrate: ${error instanceof Error ? error.message : String(error)}\n`),
    );
    return 1;
  } finally {
    await db?.close();
  }
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}
