/**
 * The input-image limits of the contract (§2, source/mcp-tools.ja.md §2.3).
 *
 * @module
 */

/**
 * Most characters of base64 data accepted, counted on the base64 payload
 * alone: a `data:image/...;base64,` prefix does not count ("Base64文字列長").
 */
export const MAX_BASE64_LENGTH = 36_000_000;

/** Most pixels (width × height from the file header) accepted. */
export const MAX_PIXELS = 40_000_000;

/** Formats an integer with thousands separators for messages ("40,000,000"). */
export function formatCount(n: number): string {
  return n.toLocaleString("en-US");
}
