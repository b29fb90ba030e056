import { ok, strictEqual } from "node:assert";
import { hashApiKey, nodeScrypt, SCRYPT_PARAMS, verifyApiKey } from "./key_hash.ts";

function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

Deno.test("nodeScrypt matches the RFC 7914 §12 test vector for N=16384, r=8, p=1, dkLen=64", async () => {
  // RFC 7914 §12: scrypt(P="pleaseletmein", S="SodiumChloride", N=16384, r=8, p=1, dkLen=64).
  const expected = "7023bdcb3afd7348461c06cd81fd38ebfda8fbba904f8e3ea9b543f6545da1f2" +
    "d5432955613f0fcf62d49705242a9af9e61e85dc0d651e40dfcf017b45575887";
  strictEqual(SCRYPT_PARAMS.N, 16384);
  strictEqual(hex(await nodeScrypt("pleaseletmein", "SodiumChloride")), expected);
});

Deno.test("hashApiKey stores a 64-byte hash and a fresh 16-byte hex salt; verifyApiKey accepts only the key", async () => {
  const key = "guinness_abcDEF123456_0123456789abcdefghijABCDEFGHIJ0123456789xyz";
  const a = await hashApiKey(key);
  const b = await hashApiKey(key);
  ok(/^[0-9a-f]{32}$/.test(a.salt), `salt ${a.salt} is not 16 bytes of hex`);
  ok(/^[0-9a-f]{128}$/.test(a.keyHash));
  ok(a.salt !== b.salt && a.keyHash !== b.keyHash, "each key gets its own salt");
  // Independent recomputation: the salt's hex text is the scrypt salt.
  strictEqual(hex(await nodeScrypt(key, a.salt)), a.keyHash);
  strictEqual(await verifyApiKey(key, a), true);
  strictEqual(await verifyApiKey(key + "x", a), false);
  strictEqual(await verifyApiKey(key, { keyHash: a.keyHash, salt: b.salt }), false);
  strictEqual(await verifyApiKey(key, { keyHash: a.keyHash.toUpperCase(), salt: a.salt }), true);
  strictEqual(await verifyApiKey(key, { keyHash: a.keyHash.slice(2), salt: a.salt }), false);
  strictEqual(await verifyApiKey(key, { keyHash: "zz" + a.keyHash.slice(2), salt: a.salt }), false);
  strictEqual(await verifyApiKey(key, { keyHash: "", salt: a.salt }), false);
});
