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

/**
 * Longest a single decode (with its resize) may run, in whole seconds
 * (sharp's `timeout`, checked by libvips as the pipeline makes progress). A
 * 40-megapixel PNG decodes and resizes in about a second; the structural
 * limits (`structure.ts`) keep hostile files from getting near this.
 */
export const DECODE_TIMEOUT_SECONDS = 10;

/** Formats an integer with thousands separators for messages ("40,000,000"). */
export function formatCount(n: number): string {
  return n.toLocaleString("en-US");
}
