/**
 * Reads `config.toml`, then its local overlay `config.local.toml` when there
 * is one (the user's own settings, which git does not track: see
 * overlay.ts), validates the two together and resolves them, failing with
 * one message that names the file, every bad key, the value it had and, for
 * a key the overlay sets, the overlay.
 *
 * @module
 */

import { parse as parseToml } from "smol-toml";
import { join, resolve } from "node:path";
import type { ZodIssue } from "../mcp/tool.ts";
import { localOverlayPath, mergeTables, setsPath } from "./overlay.ts";
import { RawConfigSchema } from "./schema.ts";
import { ConfigError } from "./error.ts";
import { resolveConfig, type ResolvedConfig } from "./resolve.ts";

/** Command-line values that override the file (validated like the file). */
export interface ConfigOverrides {
  /** Replaces `[server] transport`: `stdio` or `http` (other values fail validation). */
  transport?: string;
  /** Replaces `[server] host`: the interface the HTTP transport listens on. */
  host?: string;
  /** Replaces `[server] port`: TCP port of the HTTP transport. */
  port?: number;
}

/** Where the config comes from and what overrides it. */
export interface LoadConfigOptions {
  /**
   * Path of the TOML file; undefined = defaults only. Its overlay
   * (`<name>.local.toml` beside it, see {@link localOverlayPath}) is read on
   * top of it when it exists.
   */
  path?: string;
  /** Command-line overrides for `[server]`. */
  overrides?: ConfigOverrides;
  /** Environment (defaults to the variables of {@link CONFIG_ENV_VARS} read from the process). */
  env?: Record<string, string | undefined>;
  /** Folder for relative paths when there is no file (defaults to `Deno.cwd()`). */
  cwd?: string;
}

/**
 * The environment variables configuration reads: secrets and overrides. Only
 * these are read, so `--allow-env` can be limited to them.
 */
export const CONFIG_ENV_VARS = [
  "MCP_ENV",
  "DATABASE_URL",
  "CLOUDFRONT_SECRET_HEADER",
  "BACKEND_INTERNAL_URL",
  "BACKEND_INTERNAL_API_KEY",
] as const;

function readConfigEnv(): Record<string, string | undefined> {
  return Object.fromEntries(CONFIG_ENV_VARS.map((name) => [name, Deno.env.get(name)]));
}

function valueAt(root: unknown, path: PropertyKey[]): unknown {
  let node = root;
  for (const key of path) {
    if (node === null || typeof node !== "object") return undefined;
    node = (node as Record<PropertyKey, unknown>)[key];
  }
  return node;
}

/**
 * Formats zod issues as `key: problem (got value)` lines; with `overlay`
 * (the overlay's parsed text and its path), a key the overlay sets says so
 * with ` [in <overlay>]`.
 */
export function formatIssues(
  issues: ZodIssue[],
  input: unknown,
  overlay?: { doc: unknown; path: string },
): string[] {
  const lines: string[] = [];
  const where = (path: readonly PropertyKey[]) =>
    overlay && setsPath(overlay.doc, path) ? ` [in ${overlay.path}]` : "";
  for (const issue of issues) {
    const key = issue.path.map(String).join(".");
    if (issue.code === "unrecognized_keys") {
      for (const k of issue.keys) {
        lines.push(`${key ? key + "." : ""}${k}: unknown key${where([...issue.path, k])}`);
      }
      continue;
    }
    const got = valueAt(input, issue.path);
    const shown = got === undefined ? "" : ` (got ${JSON.stringify(got)})`;
    lines.push(`${key || "(root)"}: ${issue.message}${shown}${where(issue.path)}`);
  }
  return lines;
}

/** Reads and parses one TOML file; null when `optional` and it does not exist. */
async function readToml(file: string, optional: boolean): Promise<Record<string, unknown> | null> {
  let text: string;
  try {
    text = await Deno.readTextFile(file);
  } catch (error) {
    if (optional && error instanceof Deno.errors.NotFound) return null;
    throw new ConfigError(`cannot read config file ${file}: ${(error as Error).message}`);
  }
  try {
    return parseToml(text) as Record<string, unknown>;
  } catch (error) {
    throw new ConfigError(`${file}: invalid TOML: ${(error as Error).message}`);
  }
}

/**
 * The config file to use when none is named on the command line:
 * `$SD_MCP_CONFIG`, else `./config.toml` when it exists, else none (defaults).
 * The server and the `keys` / `migrate` commands share it, so they agree on
 * where the embedded database lives.
 */
export async function defaultConfigPath(): Promise<string | undefined> {
  const fromEnv = Deno.env.get("SD_MCP_CONFIG");
  if (fromEnv) return fromEnv;
  try {
    await Deno.stat("config.toml");
    return "config.toml";
  } catch {
    return undefined;
  }
}

/**
 * The embedded PostgreSQL folder the server uses with this config
 * (`<server.data_dir>/postgres`, relative to the config file). Reads only what
 * it needs, so a command that manages keys does not need the HTTP secrets.
 */
export async function embeddedDatabaseDir(path: string | undefined): Promise<string> {
  const config = await loadConfig({ path, overrides: { transport: "stdio" } });
  return join(config.server.dataDir, "postgres");
}

/**
 * Loads, validates and resolves the configuration.
 *
 * @throws ConfigError naming the file and each bad key
 */
export async function loadConfig(options: LoadConfigOptions = {}): Promise<ResolvedConfig> {
  const env = options.env ?? readConfigEnv();
  const cwd = options.cwd ?? Deno.cwd();
  const file = options.path ? resolve(cwd, options.path) : null;
  let raw: Record<string, unknown> = {};
  let overlay: { doc: Record<string, unknown>; path: string } | undefined;
  if (file) {
    raw = (await readToml(file, false))!;
    // Beside the file, so its relative paths resolve against the same folder.
    const path = localOverlayPath(file);
    const doc = await readToml(path, true);
    if (doc !== null) {
      overlay = { doc, path };
      raw = mergeTables(raw, doc);
    }
  }
  const o = options.overrides ?? {};
  if (o.transport !== undefined || o.host !== undefined || o.port !== undefined) {
    const server = { ...(raw.server as Record<string, unknown> | undefined) };
    if (o.transport !== undefined) server.transport = o.transport;
    if (o.host !== undefined) server.host = o.host;
    if (o.port !== undefined) server.port = o.port;
    raw = { ...raw, server };
  }
  const parsed = RawConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const lines = formatIssues(parsed.error.issues, raw, overlay);
    const source = file === null
      ? "(defaults + command line)"
      : overlay
      ? `${file} + ${overlay.path}`
      : file;
    throw new ConfigError(`invalid config ${source}:\n  ${lines.join("\n  ")}`);
  }
  return resolveConfig(parsed.data, file, env, cwd, isFile);
}

/** Whether `path` is a file (for `[models] base = "auto"`, asked once at load). */
function isFile(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
}
