import { strictEqual } from "node:assert";
import { crc32 } from "./crc32.ts";

Deno.test("crc32 matches the published CRC-32 check value of '123456789'", () => {
  // The "check" value of CRC-32/ISO-HDLC (Williams, "A painless guide to CRC
  // error detection algorithms"; reveng CRC catalogue): 0xCBF43926.
  strictEqual(crc32(new TextEncoder().encode("123456789")), 0xcbf43926);
});

Deno.test("crc32 of the empty input is 0 and of IEND is the constant every PNG ends with", () => {
  strictEqual(crc32(new Uint8Array(0)), 0);
  // Every PNG ends with 00 00 00 00 49 45 4E 44 AE 42 60 82 (PNG spec §11.2.5).
  strictEqual(crc32(new TextEncoder().encode("IEND")), 0xae426082);
});
