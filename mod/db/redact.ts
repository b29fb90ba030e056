/**
 * Keeping the DSN password out of logs and error texts: a redacted form of a
 * database URL for logging, and a scrubber for messages that might echo it.
 *
 * @module
 */

/**
 * Returns `url` safe to log: the password becomes `***` and the query string
 * (libpq URIs may carry `?password=`) is dropped. An unparseable URL is not
 * echoed at all, since it may still contain a password.
 */
export function redactDatabaseUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return "<unparseable database URL>";
  }
  const user = parsed.username ? decodeURIComponent(parsed.username) : "";
  const auth = user
    ? (parsed.password ? `${user}:***@` : `${user}@`)
    : (parsed.password ? "***@" : "");
  const port = parsed.port ? `:${parsed.port}` : "";
  return `${parsed.protocol}//${auth}${parsed.hostname}${port}${parsed.pathname}`;
}

/** The password in a database URL (decoded), or undefined when it has none. */
export function databaseUrlPassword(url: string): string | undefined {
  try {
    const password = new URL(url).password;
    return password ? decodeURIComponent(password) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Replaces every occurrence of each secret (raw and percent-encoded) in `text`
 * with `***`, for error messages from libraries that might echo connection
 * parameters.
 */
export function scrubSecrets(text: string, secrets: readonly (string | undefined)[]): string {
  let out = text;
  for (const secret of secrets) {
    if (!secret) continue;
    for (const form of new Set([secret, encodeURIComponent(secret)])) {
      out = out.replaceAll(form, "***");
    }
  }
  return out;
}

/**
 * Takes the server's absolute paths out of `text`, for error messages that
 * may reach a client (a tool result, an HTTP body): each `known` path
 * becomes its label (the setting a user knows it by, e.g. `server.data_dir`),
 * longest first, and any other absolute path becomes `…`. The operator's log
 * keeps the full message where it is written; a remote caller learns what
 * failed, not where the server keeps its files.
 */
export function hidePaths(text: string, known: readonly (readonly [string, string])[]): string {
  let out = text;
  const sorted = [...known].filter(([path]) => path.length > 1).sort((a, b) =>
    b[0].length - a[0].length
  );
  for (const [path, label] of sorted) out = out.replaceAll(path, label);
  // Quoted (PostgreSQL quotes paths with "", Deno and Node with ''), then bare:
  // a bare path starts the text or follows a space, a bracket or "=", and ends
  // before a space or a bracket, its last "." ":" "," or ";" left in place.
  return out
    .replace(/(["'`])\/[^"'`\n]*\1/g, "$1…$1")
    .replace(/(^|[\s(\[=])\/[^\s'"`()\[\]]*?(?=[.:,;]?(?:[\s'"`)\]]|$))/g, "$1…");
}
