/**
 * Constant-time comparison of two strings of any lengths, for the
 * `X-MCP-Token` shared secret.
 *
 * @module
 */

import { createHash, timingSafeEqual } from "node:crypto";

/**
 * True when `a === b`. Both sides are hashed with SHA-256 first, so the
 * comparison always runs over 32 bytes and neither the secret's length nor
 * the position of the first differing character shows in the timing
 * (`timingSafeEqual` alone throws on unequal lengths).
 */
export function constantTimeEqual(a: string, b: string): boolean {
  const digestA = createHash("sha256").update(a, "utf8").digest();
  const digestB = createHash("sha256").update(b, "utf8").digest();
  return timingSafeEqual(digestA, digestB);
}

/** SHA-256 of `text`, hex: a fixed-size stand-in for a secret in memory maps. */
export function sha256Hex(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex");
}
