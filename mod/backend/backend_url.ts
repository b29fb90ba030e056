/**
 * Builds the URL of one backend internal API request from the configured base
 * URL, path segments and query values.
 *
 * @module
 */

/**
 * Joins `baseUrl` (which may carry a path prefix such as `/api`) with
 * percent-encoded path segments and a query string of the defined values.
 *
 * Each segment goes through `encodeURIComponent`, so the `:` of a design id
 * becomes `%3A` and a `/` cannot open a new segment. Segments `.` and `..`
 * are refused: the WHATWG URL parser resolves them (even as `%2E`), which
 * would send the request to a different endpoint.
 *
 * @param baseUrl The backend base URL (`BACKEND_INTERNAL_URL`), http or https.
 * @param path Unencoded path segments, e.g. `["internal", "code", id]`.
 * @param query Query values in order; `undefined` and `null` are left out.
 * @returns The absolute URL.
 * @throws {TypeError} When a segment is empty, `.` or `..`.
 *
 * @example
 * ```ts
 * buildBackendUrl("http://backend:3000/", ["internal", "des2code", "42_f_1:2"]);
 * // "http://backend:3000/internal/des2code/42_f_1%3A2"
 * ```
 */
export function buildBackendUrl(
  baseUrl: string,
  path: readonly string[],
  query?: Readonly<Record<string, string | number | undefined | null>>,
): string {
  const encoded = path.map((segment) => {
    if (segment === "" || segment === "." || segment === "..") {
      throw new TypeError(
        `Cannot build backend URL: path segment ${JSON.stringify(segment)} is not allowed`,
      );
    }
    return encodeURIComponent(segment);
  });
  const url = new URL(baseUrl);
  const prefix = url.pathname.replace(/\/+$/, "");
  url.pathname = `${prefix}/${encoded.join("/")}`;
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query ?? {})) {
    if (value === undefined || value === null) continue;
    params.append(key, String(value));
  }
  url.search = params.size > 0 ? `?${params.toString()}` : "";
  url.hash = "";
  return url.href;
}
