/**
 * The 32-bit Mersenne Twister exactly as PyTorch's CPU generator runs it:
 * pytorch/pytorch `aten/src/ATen/core/MT19937RNGEngine.h` (`at::mt19937`,
 * itself the Matsumoto–Nishimura `mt19937ar-cok.c` with 32-bit state words).
 *
 * @module
 */

const N = 624;
const M = 397;
const MATRIX_A = 0x9908b0df;
const UMASK = 0x80000000;
const LMASK = 0x7fffffff;

/**
 * A seeded MT19937 stream of unsigned 32-bit integers. Seeding follows
 * `init_with_uint32`: only the low 32 bits of the seed are used, as torch does.
 */
export class Mt19937 {
  readonly #state = new Uint32Array(N);
  #left = 1;
  #next = 0;

  /**
   * Initialises the 624-word state from `seed` with the Knuth recurrence of
   * torch's `init_with_uint32`.
   *
   * @param seed integer seed; only its low 32 bits reach the state (torch
   *   `state_[0] = seed & 0xffffffff`). Must already be an unsigned 32-bit value.
   */
  constructor(seed: number) {
    if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) {
      throw new RangeError(`Mt19937 seed must be an integer in 0..4294967295, got ${seed}`);
    }
    const s = this.#state;
    s[0] = seed;
    for (let j = 1; j < N; j++) {
      const prev = s[j - 1] ^ (s[j - 1] >>> 30);
      // 1812433253 * prev + j modulo 2^32; Math.imul keeps the product in 32 bits.
      s[j] = (Math.imul(1812433253, prev) + j) >>> 0;
    }
    this.#left = 1;
    this.#next = 0;
  }

  /** The next output, an unsigned 32-bit integer (torch `random()`). */
  nextU32(): number {
    if (--this.#left === 0) this.#nextState();
    let y = this.#state[this.#next++];
    y ^= y >>> 11;
    y ^= (y << 7) & 0x9d2c5680;
    y ^= (y << 15) & 0xefc60000;
    y ^= y >>> 18;
    return y >>> 0;
  }

  /** Regenerates the 624 state words (`next_state` in the torch source). */
  #nextState(): void {
    const s = this.#state;
    this.#left = N;
    this.#next = 0;
    let p = 0;
    for (let j = N - M + 1; --j; p++) s[p] = s[p + M] ^ twist(s[p], s[p + 1]);
    for (let j = M; --j; p++) s[p] = s[p + M - N] ^ twist(s[p], s[p + 1]);
    s[p] = s[p + M - N] ^ twist(s[p], s[0]);
  }
}

function twist(u: number, v: number): number {
  const mixed = ((u & UMASK) | (v & LMASK)) >>> 0;
  return ((mixed >>> 1) ^ (v & 1 ? MATRIX_A : 0)) >>> 0;
}
