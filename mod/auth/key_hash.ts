/**
 * Storing and verifying keys with scrypt (contract §5: N=16384, r=8, p=1,
 * keylen=64) and a per-key random salt. Always the asynchronous
 * `node:crypto.scrypt`, which runs off the event loop; never `scryptSync`.
 *
 * Encoding: `salt` is 16 random bytes written as 32 hex characters, and that
 * hex TEXT (its UTF-8 bytes) is the scrypt salt — the usual Node idiom
 * `scrypt(key, salt.toString("hex"), 64)`; `key_hash` is the 64-byte output
 * in hex. The password is the full key `guinness_<prefix>_<secret>`.
 *
 * @module
 */

import { randomBytes, scrypt, timingSafeEqual } from "node:crypto";

/** scrypt cost parameters of the contract. Memory per run is 128·N·r = 16 MiB. */
export const SCRYPT_PARAMS = {
  N: 16384,
  r: 8,
  p: 1,
  keylen: 64,
  // Node refuses runs needing more than `maxmem` (default 32 MiB); 64 MiB leaves headroom.
  maxmem: 64 * 1024 * 1024,
} as const;

/** The scrypt primitive, injectable so tests can count runs. */
export type ScryptFunction = (password: string, salt: string) => Promise<Uint8Array>;

/** scrypt with {@link SCRYPT_PARAMS} via the asynchronous `node:crypto.scrypt`. */
export const nodeScrypt: ScryptFunction = (password: string, salt: string): Promise<Uint8Array> =>
  new Promise((resolve, reject) => {
    scrypt(
      password,
      salt,
      SCRYPT_PARAMS.keylen,
      { N: SCRYPT_PARAMS.N, r: SCRYPT_PARAMS.r, p: SCRYPT_PARAMS.p, maxmem: SCRYPT_PARAMS.maxmem },
      (error, derived) => error ? reject(error) : resolve(new Uint8Array(derived)),
    );
  });

/** What is stored for a key. */
export interface StoredHash {
  /** scrypt output, hex (128 characters). */
  keyHash: string;
  /** 16 random bytes, hex (32 characters). */
  salt: string;
}

/** Hashes a new key with a fresh random salt. */
export async function hashApiKey(
  key: string,
  run: ScryptFunction = nodeScrypt,
): Promise<StoredHash> {
  const salt = randomBytes(16).toString("hex");
  const derived = await run(key, salt);
  return { keyHash: toHex(derived), salt };
}

/**
 * True when `key` hashes to `stored.keyHash` with `stored.salt`, compared in
 * constant time. A stored hash that is not 128 hex characters never matches.
 */
export async function verifyApiKey(
  key: string,
  stored: StoredHash,
  run: ScryptFunction = nodeScrypt,
): Promise<boolean> {
  const derived = await run(key, stored.salt);
  if (!/^[0-9a-fA-F]*$/.test(stored.keyHash) || stored.keyHash.length !== derived.length * 2) {
    return false;
  }
  const expected = Uint8Array.from(
    stored.keyHash.match(/../g) ?? [],
    (pair) => parseInt(pair, 16),
  );
  return timingSafeEqual(derived, expected);
}

/** Lower-case hex of bytes. */
function toHex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}
