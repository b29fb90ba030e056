import { deepStrictEqual, strictEqual } from "node:assert";
import { checkBase64, decodeBase64 } from "./base64.ts";
import { MAX_BASE64_LENGTH } from "./limits.ts";
import { throwsImage } from "./testing.ts";

Deno.test("decodeBase64 decodes canonical base64 with 0, 1 and 2 padding characters", () => {
  // RFC 4648 §10 test vectors.
  deepStrictEqual(decodeBase64("input_image", "Zm9v"), new TextEncoder().encode("foo"));
  deepStrictEqual(decodeBase64("input_image", "Zm9vYg=="), new TextEncoder().encode("foob"));
  deepStrictEqual(decodeBase64("input_image", "Zm9vYmE="), new TextEncoder().encode("fooba"));
  deepStrictEqual(decodeBase64("input_image", "+/+/"), Uint8Array.of(0xfb, 0xff, 0xbf));
});

Deno.test("base64: a space is rejected with its offset", () => {
  throwsImage(() => checkBase64("input_image", "Zm9v Zm9v"), "input_image", "space", "offset 4");
});

Deno.test("base64: a tab is rejected with its offset", () => {
  throwsImage(() => checkBase64("mask_image", "Zm9vZm9\t"), "mask_image", "tab", "offset 7");
});

Deno.test("base64: a newline (MIME line break) is rejected", () => {
  throwsImage(
    () => checkBase64("input_image", "Zm9v\nZm9v"),
    "newline (U+000A) at offset 4",
    "line breaks",
  );
  throwsImage(() => checkBase64("input_image", "Zm9v\r\nZm9v"), "carriage return", "offset 4");
});

Deno.test("base64: a foreign character is named with its code point and offset", () => {
  throwsImage(() => checkBase64("input_image", "Zm*v"), '"*" (U+002A) at offset 2');
  throwsImage(() => checkBase64("input_image", "Zm9é"), '"é" (U+00E9) at offset 3');
  throwsImage(() => checkBase64("input_image", "Zm9v\u0000"), "control character U+0000");
});

Deno.test("base64: URL-safe '-' and '_' are rejected as such", () => {
  throwsImage(() => checkBase64("input_image", "ab-d"), "URL-safe", '"-"', "offset 2");
  throwsImage(() => checkBase64("input_image", "abc_"), "URL-safe", '"_"', "offset 3");
});

Deno.test("base64: padding in the middle, too much padding and missing padding", () => {
  throwsImage(() => checkBase64("input_image", "Zg==Zm9v"), '"=" padding at offset 2');
  throwsImage(() => checkBase64("input_image", "Zm=v"), "padding at offset 2");
  throwsImage(() => checkBase64("input_image", "Z==="), "3", "at most 2");
  // "Zg" (= "f") without its "==": length 2.
  throwsImage(() => checkBase64("input_image", "Zg"), "length 2 is not a multiple of 4");
  throwsImage(() => checkBase64("input_image", "Zg="), "length 3 is not a multiple of 4");
});

Deno.test("base64: length % 4 != 0 without padding is rejected", () => {
  throwsImage(() => checkBase64("input_image", "Zm9vZ"), "length 5 is not a multiple of 4");
});

Deno.test("base64: non-zero unused trailing bits are rejected, naming the canonical char", () => {
  // "Zh==" decodes leniently to "f" like "Zg==", but 'h' (33) has low bits 0001.
  // The canonical form is computed independently with the native encoder.
  const lenient = Uint8Array.fromBase64("Zh==", { lastChunkHandling: "loose" });
  const canonical = lenient.toBase64();
  strictEqual(canonical, "Zg==");
  throwsImage(() => checkBase64("input_image", "Zh=="), "non-canonical", "offset 1", '"g"');
  // One "=": the last data character has 2 unused bits ("Zm9=" → canonical "Zm8=").
  const canonical1 = Uint8Array.fromBase64("Zm9=", { lastChunkHandling: "loose" }).toBase64();
  throwsImage(() => checkBase64("input_image", "Zm9="), "offset 2", `"${canonical1[2]}"`);
});

Deno.test("base64: the empty string is rejected", () => {
  throwsImage(() => checkBase64("input_image", ""), "empty");
});

Deno.test("base64: 36,000,001 characters are rejected before any scan; 36,000,000 pass", () => {
  strictEqual(MAX_BASE64_LENGTH, 36_000_000);
  // A '*' at the very start proves the length is checked before the character scan.
  const over = "*" + "A".repeat(MAX_BASE64_LENGTH);
  throwsImage(
    () => checkBase64("input_image", over),
    "36,000,001 characters long",
    "limit is 36,000,000",
  );
  strictEqual(checkBase64("input_image", "A".repeat(MAX_BASE64_LENGTH)), 0);
});
