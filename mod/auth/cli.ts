/**
 * `deno task keys …`: create, list, revoke and soft-delete API keys.
 *
 * Uses `DATABASE_URL` when set, else the embedded database in `--data-dir`
 * (default `$SD_MCP_DATA_DIR`, else `.data/postgres`); while the HTTP server
 * runs on the same embedded cluster, this connects to the server's
 * PostgreSQL (a session of its own, with the cluster's password) instead of
 * starting a second one. Every statement is bounded ({@link STATEMENT_TIMEOUT_MS}).
 * `revoke` and `delete` report the prefix the database returned, and exit 1
 * when no row changed.
 *
 * `create` prints the new key once; its LAST line is the key alone. Nothing
 * else ever prints a secret or a hash.
 *
 * @module
 */

import { type Help, printHelp, usageText, wantsHelp } from "../cli/mod.ts";
import { type Database, openDatabase } from "../db/mod.ts";
import { defaultConfigPath, embeddedDatabaseDir } from "../config/mod.ts";
import { type LogLevel, setLogLevel } from "../log/mod.ts";
import { createKey } from "./create_key.ts";
import {
  type ApiKeyListing,
  deleteKey,
  listKeys,
  type Permission,
  revokeKey,
} from "./key_store.ts";

const HELP: Help = {
  usage: [
    "deno task keys create --project N|none --user N|none --permission read|write [--name S] " +
    "[--expires DATE]",
    "deno task keys list",
    "deno task keys revoke PREFIX",
    "deno task keys delete PREFIX",
  ],
  summary: "API keys for the HTTP transport. `create` prints a new key once (its last line is " +
    "the key alone; only a scrypt hash of it is stored). `list` shows every key with its state " +
    "(active, revoked, expired, deleted), never a secret. `revoke` stops a key at once; " +
    "`delete` stops it too and marks it deleted (the row is kept). Either way, in the same " +
    "transaction, the key's queued generations are cancelled and its running one stops at " +
    "its next sampler step (the server reads that twice a second); its finished images stay " +
    "readable by the other keys of its project until they expire ([jobs] " +
    "result_ttl_seconds), never by the key itself. PREFIX is the key's prefix as `list` " +
    "shows it, never the full key.",
  options: [
    [
      "--project N|none",
      "create: the project the key may act on; none = any project (stored as NULL)",
    ],
    ["--user N|none", "create: the user the key acts as; none = no user"],
    ["--permission P", "create: read (read-only tools) or write (every tool)"],
    ["--name S", "create: a label shown by `list`"],
    [
      "--expires DATE",
      "create: when the key stops working, ISO 8601 with a zone (2027-01-31T00:00:00Z) or a " +
      "date (midnight UTC); default: never",
    ],
    [
      "--data-dir DIR",
      "the embedded database's folder (default: $SD_MCP_DATA_DIR, else <server.data_dir>/postgres " +
      "of the config); unused when DATABASE_URL is set",
    ],
    [
      "--config PATH",
      "the config whose [server] data_dir is used (default: $SD_MCP_CONFIG, else ./config.toml " +
      "when present, else .data/postgres)",
    ],
    ["-h, --help", "print this help and exit"],
  ],
  notes: [
    "Database: DATABASE_URL when set, else the embedded database the server uses; while the " +
    "server runs on it, this connects to the server's PostgreSQL instead of starting a second " +
    "one. Exit status: 0 done, 1 nothing changed (unknown prefix, or already revoked or " +
    "deleted) or the database failed, 2 a command-line mistake.",
  ],
};

/**
 * Bound on every statement of the CLI, client and server side: a CLI never
 * hangs on a stuck database or a lock (it reports "database unavailable").
 */
export const STATEMENT_TIMEOUT_MS = 15_000;

/** A command-line mistake: printed with the usage text, exit status 2. */
class UsageError extends Error {}

/** Parsed command line. */
interface Parsed {
  command: string;
  positional: string[];
  flags: Map<string, string>;
}

const VALUE_FLAGS = new Set([
  "project",
  "user",
  "permission",
  "name",
  "expires",
  "data-dir",
  "config",
]);

function parseArgs(args: readonly string[]): Parsed {
  const [command, ...rest] = args;
  if (!command || command === "help" || command === "--help" || command === "-h") {
    return { command: "help", positional: [], flags: new Map() };
  }
  const positional: string[] = [];
  const flags = new Map<string, string>();
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i];
    if (!arg.startsWith("--")) {
      positional.push(arg);
      continue;
    }
    const eq = arg.indexOf("=");
    const name = arg.slice(2, eq === -1 ? undefined : eq);
    if (!VALUE_FLAGS.has(name)) throw new UsageError(`unknown option --${name}`);
    let value: string | undefined;
    if (eq !== -1) value = arg.slice(eq + 1);
    else value = rest[++i];
    if (value === undefined) throw new UsageError(`option --${name} needs a value`);
    if (flags.has(name)) throw new UsageError(`option --${name} given twice`);
    flags.set(name, value);
  }
  return { command, positional, flags };
}

function idOption(flags: Map<string, string>, name: "project" | "user"): number | null {
  const raw = flags.get(name);
  if (raw === undefined) throw new UsageError(`create needs --${name} N (or --${name} none)`);
  if (raw === "none") return null;
  if (!/^[1-9][0-9]*$/.test(raw) || !Number.isSafeInteger(Number(raw))) {
    throw new UsageError(`--${name} must be a positive integer or "none", got "${raw}"`);
  }
  return Number(raw);
}

function permissionOption(flags: Map<string, string>): Permission {
  const raw = flags.get("permission");
  if (raw === "read" || raw === "write") return raw;
  throw new UsageError(
    `create needs --permission read or --permission write, got ${
      raw === undefined ? "nothing" : `"${raw}"`
    }`,
  );
}

function expiresOption(flags: Map<string, string>): Date | null {
  const raw = flags.get("expires");
  if (raw === undefined) return null;
  // A date-time with an explicit zone, or a plain date (midnight UTC); nothing locale-dependent.
  if (!/^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2}))?$/.test(raw)) {
    throw new UsageError(
      `--expires must be an ISO 8601 date or date-time with a zone (e.g. 2027-01-31T00:00:00Z), got "${raw}"`,
    );
  }
  const date = new Date(raw);
  if (Number.isNaN(date.getTime())) throw new UsageError(`--expires is not a valid date: "${raw}"`);
  if (date.getTime() <= Date.now()) {
    throw new UsageError(`--expires must be in the future, got ${date.toISOString()}`);
  }
  return date;
}

function prefixArgument(parsed: Parsed): string {
  if (parsed.positional.length !== 1) {
    throw new UsageError(
      `${parsed.command} needs exactly one PREFIX, got ${parsed.positional.length} arguments`,
    );
  }
  const prefix = parsed.positional[0];
  if (prefix.startsWith("guinness_")) {
    // Refuse rather than echo: the argument may be a full key, and it must not be printed back.
    throw new UsageError(
      `${parsed.command} takes the key's prefix (see "keys list"), not the full key`,
    );
  }
  if (!/^[a-zA-Z0-9_-]{1,128}$/.test(prefix)) {
    throw new UsageError(`PREFIX may contain only letters, digits, "_" and "-", got "${prefix}"`);
  }
  return prefix;
}

const encoder = new TextEncoder();
function out(text: string): void {
  Deno.stdout.writeSync(encoder.encode(text + "\n"));
}
function err(text: string): void {
  Deno.stderr.writeSync(encoder.encode(text + "\n"));
}

function time(date: Date | null): string {
  return date ? date.toISOString().replace(/\.\d{3}Z$/, "Z") : "-";
}

function formatList(keys: readonly ApiKeyListing[]): string[] {
  const header = [
    "PREFIX",
    "NAME",
    "PROJECT",
    "USER",
    "PERMISSION",
    "CREATED",
    "LAST_USED",
    "EXPIRES",
    "STATE",
  ];
  const rows = keys.map((k) => [
    k.keyPrefix,
    k.name ?? "-",
    k.projectId === null ? "any" : String(k.projectId),
    k.userId === null ? "-" : String(k.userId),
    k.permission,
    time(k.createdAt),
    time(k.lastUsedAt),
    time(k.expiresAt),
    k.state,
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  return [header, ...rows].map((r) =>
    r.map((cell, i) => cell.padEnd(widths[i])).join("  ").trimEnd()
  );
}

/**
 * Validates the command line and returns the work to do once the database is
 * open, so mistakes are reported before any database is started.
 */
function plan(parsed: Parsed): (db: Database) => Promise<number> {
  switch (parsed.command) {
    case "create": {
      if (parsed.positional.length > 0) {
        throw new UsageError(`create takes no positional arguments, got "${parsed.positional[0]}"`);
      }
      const options = {
        projectId: idOption(parsed.flags, "project"),
        userId: idOption(parsed.flags, "user"),
        permission: permissionOption(parsed.flags),
        name: parsed.flags.get("name") ?? null,
        expiresAt: expiresOption(parsed.flags),
      };
      return async (db) => {
        const created = await createKey(db, options);
        out(
          `Created API key ${created.prefix}. It is shown only this once and cannot be recovered; store it now.`,
        );
        out(created.key);
        return 0;
      };
    }
    case "list":
      if (parsed.positional.length > 0) {
        throw new UsageError(`list takes no arguments, got "${parsed.positional[0]}"`);
      }
      return async (db) => {
        const keys = await listKeys(db);
        if (keys.length === 0) out("no API keys");
        for (const line of keys.length > 0 ? formatList(keys) : []) out(line);
        return 0;
      };
    case "revoke":
    case "delete": {
      const command = parsed.command;
      const prefix = prefixArgument(parsed);
      return async (db) => {
        const result = command === "revoke"
          ? await revokeKey(db, prefix)
          : await deleteKey(db, prefix);
        if (result === "unknown") {
          err(`keys ${command}: no API key with prefix ${prefix}`);
          return 1;
        }
        if (result === "unchanged") {
          err(
            `keys ${command}: API key ${prefix} was already ${
              command === "revoke" ? "revoked or deleted" : "deleted"
            }; nothing changed`,
          );
          return 1;
        }
        // The prefix the database returned (RETURNING key_prefix), equal to the argument.
        out(`API key ${prefix} ${command === "revoke" ? "revoked" : "deleted"}`);
        return 0;
      };
    }
    default:
      throw new UsageError(`unknown command "${parsed.command}"`);
  }
}

/** Runs the CLI with `args` and returns the exit status. */
export async function main(args: readonly string[]): Promise<number> {
  if (!Deno.env.get("SD_MCP_LOG_LEVEL")) setLogLevel("warn" satisfies LogLevel);
  let parsed: Parsed;
  let work: (db: Database) => Promise<number>;
  try {
    if (wantsHelp(args)) return printHelp(HELP);
    parsed = parseArgs(args);
    if (parsed.command === "help") return printHelp(HELP);
    work = plan(parsed);
  } catch (error) {
    if (error instanceof UsageError) {
      err(`keys: ${error.message}\n${usageText(HELP)}`);
      return 2;
    }
    throw error;
  }
  let db: Database | undefined;
  try {
    db = await openDatabase({
      url: Deno.env.get("DATABASE_URL") || undefined,
      embeddedDir: parsed.flags.get("data-dir") || Deno.env.get("SD_MCP_DATA_DIR") ||
        await embeddedDatabaseDir(parsed.flags.get("config") ?? await defaultConfigPath()),
      maxConnections: 2,
      connectTimeoutSeconds: 10,
      queryTimeoutMs: STATEMENT_TIMEOUT_MS,
    });
    return await work(db);
  } catch (error) {
    // DatabaseError messages carry no DSN password; nothing else here holds a secret.
    err(`keys ${parsed.command}: ${error instanceof Error ? error.message : String(error)}`);
    return 1;
  } finally {
    await db?.close();
  }
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}
