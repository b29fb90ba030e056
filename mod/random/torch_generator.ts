/**
 * A CPU random generator that reproduces float32
 * `torch.randn(n, generator=torch.Generator("cpu").manual_seed(seed))`.
 *
 * Sources (pytorch/pytorch):
 * - `aten/src/ATen/CPUGeneratorImpl.cpp`: `manual_seed` builds a fresh
 *   `mt19937(seed)` and clears the cached normal samples; `random64()` is
 *   `(first << 32) | second`.
 * - `aten/src/ATen/core/TransformationHelper.h` `uniform_real`: float takes the
 *   low 24 bits of one `random()` times 2^-24; double takes the low 53 bits of
 *   `random64()` times 2^-53.
 * - `aten/src/ATen/native/cpu/DistributionTemplates.h` `normal_kernel`: a
 *   contiguous float tensor with numel >= 16 is filled by `normal_fill`
 *   (uniforms for the whole tensor first, then Box–Muller on blocks of 16
 *   pairing j with j+8, `u1 = 1 - data[j]`; when numel % 16 != 0 the last 16
 *   slots get fresh uniforms and are recomputed). Smaller tensors draw each
 *   value from `at::normal_distribution<double>` and cast it to float.
 * - `aten/src/ATen/core/DistributionsHelper.h` `normal_distribution`: two
 *   random64 uniforms u1, u2; `r = sqrt(-2 log1p(-u2))`, `theta = 2πu1`;
 *   returns `r cos theta` and caches `r sin theta` on the generator, so the
 *   next scalar draw (even in a later call) takes the cached value.
 *
 * Which Box–Muller kernel: `normal_kernel` runs `normal_fill_AVX2` (the
 * `avx_mathfun.h` polynomials) whenever the CPU has AVX2 — AVX-512 machines
 * too, since `DistributionKernels.cpp` registers `normal_stub` with
 * `REGISTER_NO_AVX512_DISPATCH` — so that is every current x86-64 machine and
 * the default here (`"avx2"`, bit-exact, see avx_mathfun.ts). ARM builds
 * (Apple silicon, aarch64 Linux) run the scalar `normal_fill_16` with the C
 * library's `logf`/`cosf`/`sinf`; `"scalar"` reproduces it with JavaScript's
 * double-precision math rounded to float32 where torch rounds, which matches
 * glibc's result or is one float32 ulp away (≈2% of values, |Δ| ≤ 4.8e-7).
 *
 * @module
 */

import { logAvx, sinCosAvx } from "./avx_mathfun.ts";
import { Mt19937 } from "./mt19937.ts";

const fround = Math.fround;
/** `2.0f * c10::pi<double>` is evaluated in double: 2π exactly doubled. */
const TWO_PI = 2 * Math.PI;
/** `_mm256_set1_ps(2.0f * c10::pi<double>)`: the same product rounded to float32. */
const TWO_PI_F32 = fround(TWO_PI);
const TWO_POW_M24 = 1 / 16777216;
const TWO_POW_M53 = 1 / 9007199254740992;
const TWO_POW_32 = 4294967296;

/** Seeds torch accepts: integers in [-2^63, 2^64). */
const MIN_SEED = -(1n << 63n);
const MAX_SEED = (1n << 64n) - 1n;

/**
 * Reduces a torch seed to the 32 bits the engine uses. Negative seeds wrap as
 * torch's `static_cast<uint64_t>` does (two's complement), then
 * `init_with_uint32` keeps `seed & 0xffffffff`.
 */
function engineSeed(seed: number | bigint): number {
  let big: bigint;
  if (typeof seed === "bigint") {
    big = seed;
  } else {
    if (!Number.isInteger(seed)) {
      throw new RangeError(`seed must be an integer, got ${seed}`);
    }
    big = BigInt(seed);
  }
  if (big < MIN_SEED || big > MAX_SEED) {
    throw new RangeError(
      `seed must be in [-2^63, 2^64 - 1] as torch.manual_seed requires, got ${big}`,
    );
  }
  return Number(BigInt.asUintN(32, big));
}

/** The Box–Muller kernel of torch's `normal_fill` for tensors of 16+ elements. */
export type NormalKernel = "avx2" | "scalar";

/** Options of {@link TorchGenerator}. */
export interface TorchGeneratorOptions {
  /**
   * `"avx2"` (default): x86-64 PyTorch, bit-exact. `"scalar"`: ARM PyTorch
   * (macOS, aarch64 Linux), within one float32 ulp.
   */
  normalKernel?: NormalKernel;
}

/**
 * A torch-compatible CPU generator: `new TorchGenerator(s)` is
 * `torch.Generator("cpu").manual_seed(s)`, and successive {@link randn} /
 * {@link rand} calls continue one stream exactly as successive torch calls on
 * that generator do (diffusers draws per-step scheduler noise this way).
 */
export class TorchGenerator {
  readonly #engine: Mt19937;
  readonly #fill16: (data: Float32Array, offset: number) => void;
  /** `next_double_normal_sample_`: the cached second Box–Muller value. */
  #nextDoubleNormal: number | null = null;

  /**
   * A fresh CPU generator, as `torch.Generator().manual_seed(seed)` makes one.
   *
   * @param seed as for `torch.Generator.manual_seed`: an integer in
   *   [-2^63, 2^64); a `number` beyond 2^53 should be passed as `bigint`.
   */
  constructor(seed: number | bigint, options: TorchGeneratorOptions = {}) {
    this.#engine = new Mt19937(engineSeed(seed));
    const kernel = options.normalKernel ?? "avx2";
    if (kernel !== "avx2" && kernel !== "scalar") {
      throw new RangeError(
        `normalKernel must be "avx2" or "scalar", got ${JSON.stringify(kernel)}`,
      );
    }
    this.#fill16 = kernel === "avx2" ? normalFill16Avx2 : normalFill16;
  }

  /**
   * `count` standard normal float32 values, as `torch.randn(count)` (or any
   * shape with `count` elements, contiguous) with this generator.
   */
  randn(count: number): Float32Array {
    checkCount(count, "randn");
    const out = new Float32Array(count);
    if (count >= 16) {
      this.#normalFill(out);
    } else {
      for (let i = 0; i < count; i++) out[i] = this.#normalDouble();
    }
    return out;
  }

  /** `count` uniform float32 values in [0, 1), as `torch.rand(count)`. */
  rand(count: number): Float32Array {
    checkCount(count, "rand");
    const out = new Float32Array(count);
    for (let i = 0; i < count; i++) out[i] = this.#uniformFloat();
    return out;
  }

  /** `uniform_real_distribution<float>(0, 1)`: 24 random bits, exact in float32. */
  #uniformFloat(): number {
    return (this.#engine.nextU32() & 0xffffff) * TWO_POW_M24;
  }

  /** `uniform_real_distribution<double>(0, 1)`: low 53 bits of `random64()`. */
  #uniformDouble(): number {
    const hi = this.#engine.nextU32();
    const lo = this.#engine.nextU32();
    return ((hi & 0x1fffff) * TWO_POW_32 + lo) * TWO_POW_M53;
  }

  /** `at::normal_distribution<double>(0, 1)` with the generator's cache. */
  #normalDouble(): number {
    if (this.#nextDoubleNormal !== null) {
      const cached = this.#nextDoubleNormal;
      this.#nextDoubleNormal = null;
      return cached;
    }
    const u1 = this.#uniformDouble();
    const u2 = this.#uniformDouble();
    const r = Math.sqrt(-2 * Math.log1p(-u2));
    const theta = TWO_PI * u1;
    this.#nextDoubleNormal = r * Math.sin(theta);
    return r * Math.cos(theta);
  }

  /** `normal_fill` for a float tensor with numel >= 16. */
  #normalFill(data: Float32Array): void {
    const size = data.length;
    for (let i = 0; i < size; i++) data[i] = this.#uniformFloat();
    for (let i = 0; i + 16 <= size; i += 16) this.#fill16(data, i);
    if (size % 16 !== 0) {
      // torch: "Recompute the last 16 values." with fresh uniforms.
      const start = size - 16;
      for (let i = 0; i < 16; i++) data[start + i] = this.#uniformFloat();
      this.#fill16(data, start);
    }
  }
}

/**
 * `normal_fill_16` (mean 0, std 1) in float32: slot j and j+8 form one
 * Box–Muller pair; `1 - u` maps [0,1) to (0,1] so the log is finite.
 */
function normalFill16(data: Float32Array, offset: number): void {
  for (let j = 0; j < 8; j++) {
    const u1 = fround(1 - data[offset + j]);
    const u2 = data[offset + j + 8];
    const radius = fround(Math.sqrt(fround(-2 * fround(Math.log(u1)))));
    const theta = fround(TWO_PI * u2);
    data[offset + j] = radius * fround(Math.cos(theta));
    data[offset + j + 8] = radius * fround(Math.sin(theta));
  }
}

/**
 * `normal_fill_16_AVX2` (mean 0, std 1): the same pairing with the
 * avx_mathfun polynomials; `fmadd(n, std=1, mean=0)` leaves `n` unchanged.
 */
function normalFill16Avx2(data: Float32Array, offset: number): void {
  for (let j = 0; j < 8; j++) {
    const u1 = fround(1 - data[offset + j]);
    const u2 = data[offset + j + 8];
    const radius = fround(Math.sqrt(fround(-2 * logAvx(u1))));
    const [sin, cos] = sinCosAvx(fround(TWO_PI_F32 * u2));
    data[offset + j] = radius * cos;
    data[offset + j + 8] = radius * sin;
  }
}

function checkCount(count: number, what: string): void {
  if (!Number.isSafeInteger(count) || count < 0) {
    throw new RangeError(`${what} count must be a non-negative integer, got ${count}`);
  }
}
