/**
 * Why a download failed, said so that a person can act: a host that cannot
 * be reached at all ({@link HostUnreachableError}: DNS, refused, TLS, no
 * route; retrying cannot help) is told apart from a transient failure worth
 * retrying (cut connections, HTTP 408/425/429/5xx) and from a permanent one.
 * Deno's fetch says only "fetch failed" at the top of its error, so the
 * causes are read down the chain.
 *
 * @module
 */

import type { ProxyChoice } from "./proxy.ts";

/** A failure worth retrying (the partial file is kept and resumed). */
export class TransientError extends Error {}

/**
 * The first request to a host failed before any answer (DNS, refused, TLS,
 * timeout): retrying cannot help, so the whole run ends with one line that
 * names the host, the cause, the proxy variables and the offline way.
 */
export class HostUnreachableError extends Error {
  /** The host that could not be reached. */
  readonly host: string;
  /** Short cause, e.g. "DNS lookup failed". */
  readonly reason: string;
  /** The proxy the request went through, if any (then the cause may be the proxy's). */
  readonly proxy?: ProxyChoice;
  /** Creates the error; the message is the one line to print. */
  constructor(host: string, reason: string, detail: string, proxy?: ProxyChoice) {
    const offline = "without network, place the files by hand and lock them with " +
      "`deno task models add DIR` (docs/models.md)";
    super(
      proxy === undefined
        ? `cannot reach ${host}: ${reason} (${detail}). Downloads use HTTPS_PROXY / HTTP_PROXY ` +
          `when set and reach the hosts in NO_PROXY directly; ${offline}`
        : `cannot reach ${host} through the proxy ${proxy.shown} (${proxy.variable}): ${reason} ` +
          `(${detail}). Check that the proxy runs and lets ${host} through, or unset ` +
          `${proxy.variable} (or add ${host} to NO_PROXY) to connect directly; ${offline}`,
    );
    this.name = "HostUnreachableError";
    this.host = host;
    this.reason = reason;
    this.proxy = proxy;
  }
}

/** The text of an error and its causes (Deno's fetch says only "fetch failed" at the top). */
export function errorChain(e: unknown): string {
  const parts: string[] = [];
  let cur: unknown = e;
  for (let i = 0; i < 5 && cur !== undefined && cur !== null; i++) {
    const m = cur instanceof Error ? cur.message : String(cur);
    if (m && !parts.some((p) => p.includes(m))) parts.push(m);
    cur = cur instanceof Error ? cur.cause : undefined;
  }
  return parts.join(": ") || "unknown error";
}

/** Classifies a failure to connect; undefined when it is not one. */
export function connectFailure(text: string): string | undefined {
  if (
    /dns error|failed to lookup address|name or service not known|nodename nor servname|getaddrinfo|no such host|temporary failure in name resolution/i
      .test(text)
  ) {
    return "DNS lookup failed";
  }
  if (/connection refused|ECONNREFUSED|os error 111\b|os error 61\b|os error 10061/i.test(text)) {
    return "connection refused";
  }
  if (/certificate|tls|ssl|handshake|corrupt message|InvalidContentType|peer/i.test(text)) {
    return "TLS error";
  }
  if (
    /network is unreachable|no route to host|host is unreachable|os error 101\b|os error 113\b/i
      .test(text)
  ) {
    return "network unreachable";
  }
  if (/\(Connect\)|tcp connect error|connect error/i.test(text)) return "connection failed";
  return undefined;
}

/** The host named in a fetch error ("error sending request for url (https://h/…)"), else `fallback`. */
export function hostInError(text: string, fallback: string): string {
  const m = text.match(/for url \(([^)\s]+)\)/);
  if (m) {
    try {
      return new URL(m[1]).host;
    } catch {
      // not a URL
    }
  }
  return fallback;
}

/** A failure that retrying cannot fix. */
export class PermanentError extends Error {}

/** HTTP statuses worth retrying: timeouts, rate limits and the server-side 5xx that pass. */
export const TRANSIENT_STATUS = new Set([408, 425, 429, 500, 502, 503, 504]);
