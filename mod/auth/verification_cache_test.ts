import { notStrictEqual, strictEqual } from "node:assert";
import { VerificationCache } from "./verification_cache.ts";

const stored = { keyHash: "aa".repeat(64), salt: "bb".repeat(16) };

Deno.test("a success is remembered for the TTL after its last use (sliding)", () => {
  let now = 1_000;
  const cache = new VerificationCache({ ttlMs: 500, now: () => now });
  const id = VerificationCache.keyId("k", stored);
  strictEqual(cache.hit(id), false);
  cache.remember(id);
  // Used every 400 ms: never expires, though 2 s pass in all (a fixed TTL would expire at 1,500).
  for (let i = 0; i < 5; i++) {
    now += 400;
    strictEqual(cache.hit(id), true, `hit ${i} at ${now}`);
  }
  now += 500; // idle for exactly the TTL: stale
  strictEqual(cache.hit(id), false);
  strictEqual(cache.size, 0, "the stale entry is dropped");
});

Deno.test("a TTL of 0 remembers nothing", () => {
  const cache = new VerificationCache({ ttlMs: 0 });
  const id = VerificationCache.keyId("k", stored);
  cache.remember(id);
  strictEqual(cache.hit(id), false);
  strictEqual(cache.size, 0);
});

Deno.test("a re-keyed row (new hash or salt) or another key has another id", () => {
  const ids = new Set([
    VerificationCache.keyId("k", stored),
    VerificationCache.keyId("k", { ...stored, keyHash: "cc".repeat(64) }),
    VerificationCache.keyId("k", { ...stored, salt: "dd".repeat(16) }),
    VerificationCache.keyId("other", stored),
  ]);
  strictEqual(ids.size, 4);
  const id = VerificationCache.keyId("k", stored);
  notStrictEqual(id.indexOf("k"), 0);
  strictEqual(id.length, 64, "a SHA-256, not the key");
});

Deno.test("the least recently used entries are evicted beyond maxEntries", () => {
  const cache = new VerificationCache({ ttlMs: 60_000, maxEntries: 3 });
  for (const key of ["a", "b", "c"]) cache.remember(VerificationCache.keyId(key, stored));
  strictEqual(cache.hit(VerificationCache.keyId("a", stored)), true); // a is now the newest
  cache.remember(VerificationCache.keyId("d", stored));
  strictEqual(cache.size, 3);
  strictEqual(cache.hit(VerificationCache.keyId("b", stored)), false, "b was the oldest");
  strictEqual(cache.hit(VerificationCache.keyId("a", stored)), true);
  strictEqual(cache.hit(VerificationCache.keyId("d", stored)), true);
});
