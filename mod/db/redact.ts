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
