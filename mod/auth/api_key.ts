/**
 * API key format: `guinness_<prefix>_<secret>` (contract §5, format
 * `guinness_([a-zA-Z0-9_-]+)_([a-zA-Z0-9]+)`), generation from the CSPRNG, and
 * where a request carries a key.
 *
 * @module
 */

import { sha256Hex } from "./constant_time.ts";

/** The contract's key format. The prefix group is greedy and may hold `_` and
 * `-`; the secret group cannot hold `_`, so the LAST `_` splits the two. */
export const API_KEY_PATTERN = /^guinness_([a-zA-Z0-9_-]+)_([a-zA-Z0-9]+)$/;

/** Characters of generated prefixes and secrets (no `_` or `-`, so the split is unambiguous). */
export const BASE62_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** Length of generated prefixes: 62^12 ≈ 2^71, so collisions are negligible. */
export const PREFIX_LENGTH = 12;

/** Length of generated secrets: 43 base62 characters carry 43·log2(62) ≈ 256 bits. */
export const SECRET_LENGTH = 43;

/** The shape of generated prefixes: {@link PREFIX_LENGTH} base62 characters. */
export const GENERATED_PREFIX_PATTERN = /^[0-9A-Za-z]{12}$/;

/** Longest key accepted for parsing; anything longer is malformed without running the regex. */
export const MAX_API_KEY_LENGTH = 512;

/** A key split into its parts. */
export interface ParsedApiKey {
  /** The full key, as presented (the scrypt input). */
  key: string;
  /** The non-secret prefix: the lookup key and what logs show. */
  prefix: string;
  /** The secret part. */
  secret: string;
}

/** Splits a key per {@link API_KEY_PATTERN}, or returns null when it does not match. */
export function parseApiKey(key: string): ParsedApiKey | null {
  if (key.length > MAX_API_KEY_LENGTH) return null;
  const match = API_KEY_PATTERN.exec(key);
  if (!match) return null;
  return { key, prefix: match[1], secret: match[2] };
}

/**
 * How a parsed prefix may appear in a log line. A prefix of the generated
 * shape is shown as is. Anything else is shown only as the first 16 hex
 * digits of its SHA-256 and its length: the contract's pattern lets the
 * prefix hold `_`, so a key with an extra `_…` suffix (or a secret pasted
 * twice) parses with its secret inside the "prefix", and must not be logged.
 * Such keys are still looked up (the contract allows any prefix matching its
 * pattern), only never printed.
 */
export function prefixForLog(prefix: string): Record<string, string | number> {
  if (GENERATED_PREFIX_PATTERN.test(prefix)) return { keyPrefix: prefix };
  return { keyPrefixSha256: sha256Hex(prefix).slice(0, 16), keyPrefixLength: prefix.length };
}

/**
 * `length` characters of {@link BASE62_ALPHABET} from the CSPRNG. Bytes ≥ 248
 * (= 4·62) are rejected so `byte % 62` is uniform: no modulo bias.
 */
export function randomBase62(length: number): string {
  let out = "";
  // getRandomValues fills at most 65,536 bytes per call.
  const buffer = new Uint8Array(Math.min(65_536, Math.max(16, length * 2)));
  while (out.length < length) {
    crypto.getRandomValues(buffer);
    for (const byte of buffer) {
      if (byte >= 248) continue;
      out += BASE62_ALPHABET[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

/** Generates a new key: {@link PREFIX_LENGTH}-character prefix, {@link SECRET_LENGTH}-character secret. */
export function generateApiKey(): ParsedApiKey {
  const prefix = randomBase62(PREFIX_LENGTH);
  const secret = randomBase62(SECRET_LENGTH);
  return { key: `guinness_${prefix}_${secret}`, prefix, secret };
}

/** Where a presented key came from, or why there is none. */
export type PresentedKey =
  | { kind: "key"; value: string; header: "mcp-api-key" | "authorization" }
  | { kind: "missing" }
  | { kind: "unsupported-scheme" };

/**
 * Reads the key from `MCP-API-Key`, or else from `Authorization: Bearer`
 * (for clients that cannot send custom headers). `MCP-API-Key` wins when both
 * are sent. An `Authorization` header with another scheme counts as no key.
 */
export function presentedKey(headers: Headers): PresentedKey {
  const direct = headers.get("mcp-api-key");
  if (direct !== null && direct.trim() !== "") {
    return { kind: "key", value: direct.trim(), header: "mcp-api-key" };
  }
  const authorization = headers.get("authorization");
  if (authorization === null || authorization.trim() === "") return { kind: "missing" };
  // RFC 6750 §2.1: `Bearer` followed by one or more spaces; the scheme is case-insensitive (RFC 9110 §11.1).
  const match = /^Bearer +(\S+)\s*$/i.exec(authorization.trim());
  if (!match) return { kind: "unsupported-scheme" };
  return { kind: "key", value: match[1], header: "authorization" };
}
