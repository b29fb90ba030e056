/**
 * A small seeded PRNG so that every built model is byte-identical for a given
 * seed (fixtures are pinned by sha256 in models.lock).
 *
 * mulberry32 (Tommy Ettinger's public-domain generator) for uniform draws;
 * FNV-1a 32-bit to derive one independent stream per model from a seed and a
 * name.
 *
 * @module
 */

/** FNV-1a 32-bit hash of a string (http://www.isthe.com/chongo/tech/comp/fnv/). */
export function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/** A deterministic uniform random stream. */
export class Rng {
  #state: number;

  /** Starts a stream from `seed` mixed with `stream` (e.g. "sd15/unet"). */
  constructor(seed: number, stream = "") {
    this.#state = (fnv1a(`${seed >>> 0}:${stream}`) ^ 0x9e3779b9) >>> 0;
  }

  /** Next uniform value in [0, 1) (mulberry32). */
  next(): number {
    let t = (this.#state = (this.#state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** `n` uniform values in [-bound, bound). */
  uniform(n: number, bound: number): Float32Array {
    const out = new Float32Array(n);
    for (let i = 0; i < n; i++) out[i] = (this.next() * 2 - 1) * bound;
    return out;
  }
}
