import { strictEqual } from "node:assert";
import { createHash } from "node:crypto";
import { constantTimeEqual, sha256Hex } from "./constant_time.ts";

Deno.test("constantTimeEqual compares strings of any lengths", () => {
  strictEqual(constantTimeEqual("s3cret-token", "s3cret-token"), true);
  strictEqual(constantTimeEqual("s3cret-token", "s3cret-tokem"), false);
  strictEqual(constantTimeEqual("s3cret-token", "s3cret"), false);
  strictEqual(constantTimeEqual("", "x"), false);
  strictEqual(constantTimeEqual("ü", "u"), false);
});

Deno.test("sha256Hex is the SHA-256 of the UTF-8 text", () => {
  // FIPS 180-2 example: SHA-256("abc").
  strictEqual(sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  strictEqual(
    sha256Hex("é"),
    createHash("sha256").update(new Uint8Array([0xc3, 0xa9])).digest("hex"),
  );
});
