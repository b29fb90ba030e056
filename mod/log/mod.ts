/**
 * Logging to stderr only: in stdio mode stdout carries the MCP protocol, so a
 * single stray `console.log` would corrupt the stream. Every module logs
 * through {@link log}.
 *
 * @module
 */

/** Severity of a log line. */
export type LogLevel = "debug" | "info" | "warn" | "error";

const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };
let threshold: number = ORDER[(Deno.env.get("SD_MCP_LOG_LEVEL") as LogLevel) ?? "info"] ??
  ORDER.info;
const encoder = new TextEncoder();

/** Sets the lowest level that is written. */
export function setLogLevel(level: LogLevel): void {
  threshold = ORDER[level];
}

/**
 * Writes one line to stderr: ISO time, level, scope, message and optional
 * JSON fields. Never pass a secret (API key, token, hash, DSN password) in
 * `message` or `fields`.
 */
export function log(
  level: LogLevel,
  scope: string,
  message: string,
  fields?: Record<string, unknown>,
): void {
  if (ORDER[level] < threshold) return;
  const extra = fields ? " " + JSON.stringify(fields) : "";
  const line = `${new Date().toISOString()} ${level.toUpperCase()} [${scope}] ${message}${extra}\n`;
  try {
    Deno.stderr.writeSync(encoder.encode(line));
  } catch {
    // stderr closed (the parent went away): nothing useful left to do.
  }
}
