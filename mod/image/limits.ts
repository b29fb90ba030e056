/**
 * The input-image limits of the contract (§2, the MCP tools contract §2.3).
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
 * Longest a single decode (with its resize) may run, in whole seconds: its
 * process is killed then (`decode_process.ts`), and sharp's own `timeout`
 * is set to it as well. A 40-megapixel PNG decodes and resizes in about a
 * second; the structural limits (`structure.ts`) keep hostile files from
 * getting near this.
 */
export const DECODE_TIMEOUT_SECONDS = 10;

/**
 * Input preparations (decode and resize of a call's images) at once: each
 * may hold a 40-megapixel image in memory.
 */
export const MAX_CONCURRENT_DECODES = 2;

/**
 * Of {@link MAX_CONCURRENT_DECODES}, most held by one API key at once, so
 * one key's decodes never take every slot from the others.
 */
export const MAX_CONCURRENT_DECODES_PER_KEY = 1;

/** Formats an integer with thousands separators for messages ("40,000,000"). */
export function formatCount(n: number): string {
  return n.toLocaleString("en-US");
}
