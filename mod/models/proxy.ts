/**
 * Which proxy Deno's `fetch` goes through for a URL, read from the same
 * environment variables in the same order (Deno's ext/fetch proxy.rs):
 * `ALL_PROXY` / `all_proxy` for every scheme, else `HTTPS_PROXY` /
 * `https_proxy` for https and `HTTP_PROXY` / `http_proxy` for http; a host
 * listed in `NO_PROXY` / `no_proxy` is reached directly. Used only to name
 * the proxy when a host cannot be reached: a dead or wrong proxy is the
 * usual cause, and the connection error alone does not say a proxy was used.
 *
 * @module
 */

/** The proxy a request goes through. */
export interface ProxyChoice {
  /** The variable that set it, e.g. `HTTPS_PROXY`. */
  variable: string;
  /** Its URL with any password replaced by `***` (safe to print). */
  shown: string;
}

/** The variables read, for `--allow-env` and for tests. */
export const PROXY_ENV_VARS = [
  "ALL_PROXY",
  "all_proxy",
  "HTTPS_PROXY",
  "https_proxy",
  "HTTP_PROXY",
  "http_proxy",
  "NO_PROXY",
  "no_proxy",
] as const;

/** Reads a variable; undefined when it is unset or not readable under the permissions. */
export function readEnv(name: string): string | undefined {
  try {
    return Deno.env.get(name) || undefined;
  } catch {
    return undefined;
  }
}

function shown(proxy: string): string {
  try {
    const url = new URL(proxy.includes("://") ? proxy : `http://${proxy}`);
    if (url.password !== "") url.password = "***";
    return url.href.replace(/\/$/, "");
  } catch {
    return proxy.replace(/\/\/([^:/@]*):[^@]*@/, "//$1:***@");
  }
}

/** Whether `host` (no port) is listed in a NO_PROXY value. */
export function bypassesProxy(host: string, noProxy: string | undefined): boolean {
  if (noProxy === undefined) return false;
  const name = host.toLowerCase().replace(/^\[|\]$/g, "");
  for (const raw of noProxy.split(",")) {
    const entry = raw.trim().toLowerCase().replace(/:\d+$/, "").replace(/^\[|\]$/g, "");
    if (entry === "") continue;
    if (entry === "*") return true;
    const domain = entry.replace(/^\*?\./, "");
    if (name === domain || name.endsWith(`.${domain}`)) return true;
  }
  return false;
}

/** The proxy `fetch` uses for `url`, or undefined for a direct connection. */
export function proxyFor(
  url: URL,
  env: (name: string) => string | undefined = readEnv,
): ProxyChoice | undefined {
  const pick = (...names: string[]) => {
    for (const name of names) {
      const value = env(name);
      if (value !== undefined && value !== "") return { variable: name, value };
    }
    return undefined;
  };
  const scheme = url.protocol === "https:" ? "HTTPS_PROXY" : "HTTP_PROXY";
  const found = pick("ALL_PROXY", "all_proxy") ??
    (url.protocol === "https:" || url.protocol === "http:"
      ? pick(scheme, scheme.toLowerCase())
      : undefined);
  if (found === undefined) return undefined;
  if (bypassesProxy(url.hostname, pick("NO_PROXY", "no_proxy")?.value)) return undefined;
  return { variable: found.variable, shown: shown(found.value) };
}
