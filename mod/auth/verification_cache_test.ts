import { rejects, strictEqual } from "node:assert";
import { VerificationCache } from "./verification_cache.ts";

const stored = { keyHash: "aa".repeat(64), salt: "bb".repeat(16) };

Deno.test("a success is remembered for the TTL, then checked again", async () => {
  let now = 1_000;
  let checks = 0;
  const cache = new VerificationCache({ ttlMs: 500, now: () => now });
  const check = () => Promise.resolve(++checks > 0);
  strictEqual(await cache.verify("k", stored, check), true);
  now += 499;
  strictEqual(await cache.verify("k", stored, check), true);
  strictEqual(checks, 1);
  now += 1; // exactly at expiry: stale
  strictEqual(await cache.verify("k", stored, check), true);
  strictEqual(checks, 2);
});

Deno.test("a failure is never remembered", async () => {
  let checks = 0;
  const cache = new VerificationCache({ ttlMs: 60_000 });
  const check = () => Promise.resolve((++checks, false));
  strictEqual(await cache.verify("k", stored, check), false);
  strictEqual(await cache.verify("k", stored, check), false);
  strictEqual(checks, 2);
  strictEqual(cache.size, 0);
});

Deno.test("a re-keyed row (new hash or salt) misses the cache", async () => {
  let checks = 0;
  const cache = new VerificationCache({ ttlMs: 60_000 });
  const check = () => Promise.resolve((++checks, true));
  await cache.verify("k", stored, check);
  await cache.verify("k", { ...stored, keyHash: "cc".repeat(64) }, check);
  await cache.verify("k", { ...stored, salt: "dd".repeat(16) }, check);
  await cache.verify("other", stored, check);
  strictEqual(checks, 4);
});

Deno.test("concurrent first verifications of one key share one check", async () => {
  let checks = 0;
  let release!: (ok: boolean) => void;
  const gate = new Promise<boolean>((resolve) => release = resolve);
  const cache = new VerificationCache({ ttlMs: 60_000 });
  const check = () => (checks++, gate);
  const all = Promise.all(Array.from({ length: 10 }, () => cache.verify("k", stored, check)));
  release(true);
  strictEqual((await all).every((ok) => ok), true);
  strictEqual(checks, 1);
});

Deno.test("a failing check rejects every waiter and is not cached", async () => {
  let checks = 0;
  const cache = new VerificationCache({ ttlMs: 60_000 });
  const check = () => (checks++, Promise.reject(new Error("scrypt exploded")));
  await rejects(
    Promise.all([cache.verify("k", stored, check), cache.verify("k", stored, check)]),
    /exploded/,
  );
  strictEqual(checks, 1);
  await rejects(cache.verify("k", stored, check), /exploded/);
  strictEqual(checks, 2);
});

Deno.test("TTL 0 remembers nothing", async () => {
  let checks = 0;
  const cache = new VerificationCache({ ttlMs: 0 });
  const check = () => Promise.resolve((++checks, true));
  await cache.verify("k", stored, check);
  await cache.verify("k", stored, check);
  strictEqual(checks, 2);
});

Deno.test("the cache keeps at most maxEntries, dropping the oldest", async () => {
  let checks = 0;
  const cache = new VerificationCache({ ttlMs: 60_000, maxEntries: 3 });
  const check = () => Promise.resolve((++checks, true));
  for (const key of ["a", "b", "c", "d"]) await cache.verify(key, stored, check);
  strictEqual(cache.size, 3);
  await cache.verify("d", stored, check); // still cached
  strictEqual(checks, 4);
  await cache.verify("a", stored, check); // evicted: checked again
  strictEqual(checks, 5);
});
