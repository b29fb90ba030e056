import { strictEqual } from "node:assert";
import { VerificationCache } from "./verification_cache.ts";

const stored = { keyHash: "aa".repeat(64), salt: "bb".repeat(16) };

Deno.test("a success is remembered for the TTL after its last use (sliding)", () => {
  let now = 1_000;
  const cache = new VerificationCache({ ttlMs: 500, now: () => now });
  const id = VerificationCache.keyId("k");
  strictEqual(cache.hit(id, stored), false);
  cache.remember(id, stored);
  // Used every 400 ms: never expires, though 2 s pass in all (a fixed TTL would expire at 1,500).
  for (let i = 0; i < 5; i++) {
    now += 400;
    strictEqual(cache.hit(id, stored), true, `hit ${i} at ${now}`);
  }
  now += 500; // idle for exactly the TTL: stale
  strictEqual(cache.holds(id), false);
  strictEqual(cache.hit(id, stored), false);
  strictEqual(cache.size, 0, "the stale entry is dropped");
});

Deno.test("a TTL of 0 remembers nothing", () => {
  const cache = new VerificationCache({ ttlMs: 0 });
  const id = VerificationCache.keyId("k");
  cache.remember(id, stored);
  strictEqual(cache.hit(id, stored), false);
  strictEqual(cache.size, 0);
});

Deno.test("a re-keyed row (new hash or salt) misses; holds() still knows the key", () => {
  const cache = new VerificationCache({ ttlMs: 60_000 });
  const id = VerificationCache.keyId("k");
  cache.remember(id, stored);
  strictEqual(cache.hit(id, { ...stored, keyHash: "cc".repeat(64) }), false);
  strictEqual(cache.hit(id, { ...stored, salt: "dd".repeat(16) }), false);
  strictEqual(cache.holds(id), true);
  strictEqual(cache.hit(VerificationCache.keyId("other"), stored), false);
  strictEqual(cache.hit(id, stored), true);
  strictEqual(id.length, 64, "a SHA-256, not the key");
});

Deno.test("holds() does not slide the expiry; hit() does", () => {
  let now = 0;
  const cache = new VerificationCache({ ttlMs: 100, now: () => now });
  const id = VerificationCache.keyId("k");
  cache.remember(id, stored);
  now = 90;
  strictEqual(cache.holds(id), true);
  now = 100;
  strictEqual(cache.holds(id), false);
});

Deno.test("the least recently used entries are evicted beyond maxEntries", () => {
  const cache = new VerificationCache({ ttlMs: 60_000, maxEntries: 3 });
  const id = (key: string) => VerificationCache.keyId(key);
  for (const key of ["a", "b", "c"]) cache.remember(id(key), stored);
  strictEqual(cache.hit(id("a"), stored), true); // a is now the newest
  cache.remember(id("d"), stored);
  strictEqual(cache.size, 3);
  strictEqual(cache.hit(id("b"), stored), false, "b was the oldest");
  strictEqual(cache.hit(id("a"), stored), true);
  strictEqual(cache.hit(id("d"), stored), true);
});
