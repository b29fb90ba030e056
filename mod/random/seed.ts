/**
 * Fresh random seeds for requests that do not give one.
 *
 * @module
 */

/**
 * A uniformly random seed in 0..2^32-1 from the platform CSPRNG
 * (`crypto.getRandomValues`), the seed range of the contract and of the
 * 32 bits torch's mt19937 keeps.
 */
export function randomSeedU32(): number {
  return crypto.getRandomValues(new Uint32Array(1))[0];
}
