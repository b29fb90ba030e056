/**
 * Canonical base64 (RFC 4648 §4, standard alphabet) validation and decoding.
 * "Canonical" (RFC 4648 §3.5) means: only `A–Z a–z 0–9 + /`, no whitespace or
 * line breaks (§3.1, §3.3), `=` padding only at the end so that the length is
 * a multiple of 4 (§3.2), and the unused low bits of the last character
 * before padding are zero (§3.5). The URL-safe alphabet (`-` `_`, §5) is
 * rejected with a message that says so.
 *
 * Validation is a single linear pass over char codes (36 M characters take
 * tens of milliseconds); decoding uses the native `Uint8Array.fromBase64`.
 *
 * @module
 */

import { ToolError } from "../mcp/tool.ts";
import { formatCount, MAX_BASE64_LENGTH } from "./limits.ts";
import type { ImageField } from "./types.ts";

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/** Char code (< 128) → 6-bit value + 1; 0 means "not in the alphabet". */
const VALUE: Uint8Array = (() => {
  const table = new Uint8Array(128);
  for (let i = 0; i < ALPHABET.length; i++) table[ALPHABET.charCodeAt(i)] = i + 1;
  return table;
})();

const EQUALS = 0x3d;

/** Describes the character at `index` of `text` for an error message. */
function describeChar(text: string, index: number): string {
  const code = text.codePointAt(index) ?? 0;
  const hex = "U+" + code.toString(16).toUpperCase().padStart(4, "0");
  switch (code) {
    case 0x20:
      return `space (${hex})`;
    case 0x09:
      return `tab (${hex})`;
    case 0x0a:
      return `newline (${hex})`;
    case 0x0d:
      return `carriage return (${hex})`;
  }
  if (code < 0x20 || (code >= 0x7f && code < 0xa0)) return `control character ${hex}`;
  return `${JSON.stringify(String.fromCodePoint(code))} (${hex})`;
}

/** Builds the image-class error for invalid base64 in `field`. */
function invalid(field: ImageField, detail: string): ToolError {
  return new ToolError("image", `${field}: invalid base64: ${detail}`);
}

/**
 * Checks that `payload` is canonical base64 within {@link MAX_BASE64_LENGTH}
 * characters; offsets in messages are 0-based positions in `payload` (after
 * any data-URI prefix). Returns the number of `=` padding characters.
 * Throws `ToolError("image")` naming `field` and the first problem found.
 */
export function checkBase64(field: ImageField, payload: string): number {
  const n = payload.length;
  if (n === 0) throw invalid(field, "the base64 data is empty");
  // The length limit comes first so that an oversized value costs nothing.
  if (n > MAX_BASE64_LENGTH) {
    throw new ToolError(
      "image",
      `${field}: base64 data is ${formatCount(n)} characters long; the limit is ${
        formatCount(MAX_BASE64_LENGTH)
      } characters`,
    );
  }
  let i = 0;
  for (; i < n; i++) {
    const c = payload.charCodeAt(i);
    if (c >= 128 || VALUE[c] === 0) break;
  }
  let padding = 0;
  if (i < n) {
    const c = payload.charCodeAt(i);
    if (c !== EQUALS) {
      if (c === 0x2d || c === 0x5f) {
        throw invalid(
          field,
          `URL-safe character ${describeChar(payload, i)} at offset ${i}; ` +
            `only the standard alphabet (A-Z a-z 0-9 + /) is accepted`,
        );
      }
      if (c === 0x0a || c === 0x0d) {
        throw invalid(
          field,
          `${describeChar(payload, i)} at offset ${i}; canonical base64 has no line breaks`,
        );
      }
      throw invalid(
        field,
        `${
          describeChar(payload, i)
        } at offset ${i} is not a base64 character (A-Z a-z 0-9 + / and trailing =)`,
      );
    }
    let j = i;
    while (j < n && payload.charCodeAt(j) === EQUALS) j++;
    if (j < n) {
      throw invalid(
        field,
        `"=" padding at offset ${i} is followed by ${
          describeChar(payload, j)
        } at offset ${j}; padding may only end the data`,
      );
    }
    padding = n - i;
    if (padding > 2) {
      throw invalid(field, `${padding} "=" padding characters at the end; at most 2 are allowed`);
    }
  }
  if (n % 4 !== 0) {
    throw invalid(
      field,
      `length ${formatCount(n)} is not a multiple of 4 (canonical base64 is padded with "=")`,
    );
  }
  if (padding > 0) {
    // The last data character carries 4 (one "=") or 2 (two "=") bits that
    // encode nothing; RFC 4648 §3.5 requires them to be zero.
    const at = n - padding - 1;
    const value = VALUE[payload.charCodeAt(at)] - 1;
    const unused = padding === 2 ? 0x0f : 0x03;
    if ((value & unused) !== 0) {
      throw invalid(
        field,
        `non-canonical ending: ${
          describeChar(payload, at)
        } at offset ${at} has non-zero unused bits ` +
          `(the canonical character is "${ALPHABET[value & ~unused]}")`,
      );
    }
  }
  return padding;
}

/**
 * Validates `payload` with {@link checkBase64}, then decodes it.
 * Throws `ToolError("image")` naming `field` on any invalid input.
 */
export function decodeBase64(field: ImageField, payload: string): Uint8Array {
  const padding = checkBase64(field, payload);
  const bytes = Uint8Array.fromBase64(payload, { lastChunkHandling: "strict" });
  const expected = (payload.length / 4) * 3 - padding;
  if (bytes.length !== expected) {
    // Cannot happen after checkBase64; guards against a decoder surprise.
    throw invalid(field, `decoded ${bytes.length} bytes, expected ${expected}`);
  }
  return bytes;
}
