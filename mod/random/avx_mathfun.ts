/**
 * Bit-exact float32 emulation of the `log256_ps` and `sincos256_ps`
 * polynomials that PyTorch's AVX2 `normal_fill_16_AVX2` uses
 * (pytorch/pytorch `aten/src/ATen/native/cpu/avx_mathfun.h`, Giovanni
 * Garberoglio's AVX port of Julien Pommier's cephes-based sse_mathfun).
 *
 * The intrinsics are plain vector `*`/`+` in GCC's headers, and PyTorch's
 * AVX2 objects are built with `-mavx2 -mfma` under GCC's default
 * `-ffp-contract=fast`, so a multiply whose single use is an add becomes one
 * fused multiply-add. The fusions below are the ones GCC makes; the result
 * was checked bit for bit against 2^21 values of real
 * `torch.randn` (PyTorch 1.13.1, GCC 12 build, AVX2 kernel).
 *
 * @module
 */

const fround = Math.fround;
const scratch = new DataView(new ArrayBuffer(4));

function bitsOf(x: number): number {
  scratch.setFloat32(0, x);
  return scratch.getUint32(0);
}

function fromBits(u: number): number {
  scratch.setUint32(0, u >>> 0);
  return scratch.getFloat32(0);
}

/** The float32 neighbour of float32 `x` towards +∞ (`up`) or −∞. */
function nextFloat(x: number, up: boolean): number {
  if (x === 0) return up ? fromBits(1) : -fromBits(1);
  const b = bitsOf(x);
  return fromBits((x > 0) === up ? b + 1 : b - 1);
}

/**
 * Single-rounding float32 fused multiply-add. `a*b` of two float32 values is
 * exact in double; the double sum can round once more, so a double result
 * that lands exactly halfway between two floats is resolved with the sum's
 * exact error (TwoSum).
 */
export function fmaf(a: number, b: number, c: number): number {
  const p = a * b;
  const s = p + c;
  const r = fround(s);
  if (r === s) return r;
  const bb = s - p;
  const err = (p - (s - bb)) + (c - bb);
  if (err === 0) return r;
  const other = nextFloat(r, s > r);
  if (s - r === other - s) return (err > 0) === (other > r) ? other : r;
  return r;
}

const MIN_NORM_POS = fromBits(0x00800000);
const SQRTHF = fround(0.707106781186547524);
const LOG_P = [
  7.0376836292e-2,
  -1.1514610310e-1,
  1.1676998740e-1,
  -1.2420140846e-1,
  1.4249322787e-1,
  -1.6668057665e-1,
  2.0000714765e-1,
  -2.4999993993e-1,
  3.3333331174e-1,
].map(fround);
const LOG_Q1 = fround(-2.12194440e-4);
const LOG_Q2 = fround(0.693359375);

/** `log256_ps` for one positive float32 lane. */
export function logAvx(value: number): number {
  let x = Math.max(value, MIN_NORM_POS);
  const exponent = bitsOf(x) >>> 23;
  // keep the mantissa, force the exponent of 0.5: x in [0.5, 1)
  x = fromBits((bitsOf(x) & ~0x7f800000) | bitsOf(0.5));
  let e = fround(exponent - 0x7f + 1);
  const below = x < SQRTHF;
  const tmp = below ? x : 0;
  x = fround(x - 1);
  if (below) e = fround(e - 1);
  x = fround(x + tmp);
  const z = fround(x * x);
  let y = LOG_P[0];
  for (let k = 1; k < LOG_P.length; k++) y = fmaf(y, x, LOG_P[k]);
  y = fround(y * x);
  y = fmaf(y, z, fround(e * LOG_Q1));
  y = fround(y - fround(z * 0.5));
  x = fround(x + y);
  return fmaf(e, LOG_Q2, x);
}

const MINUS_DP1 = fround(-0.78515625);
const MINUS_DP2 = fround(-2.4187564849853515625e-4);
const MINUS_DP3 = fround(-3.77489497744594108e-8);
const SIN_P = [-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1].map(fround);
const COS_P = [2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2].map(fround);
const FOUR_OVER_PI = fround(1.27323954473516);

/** `sincos256_ps` for one float32 lane: `[sin x, cos x]`. */
export function sinCosAvx(value: number): [number, number] {
  const negative = value < 0 || Object.is(value, -0);
  let x = Math.abs(value);
  // j = (int(x·4/π) + 1) & ~1: the octant, rounded to even
  let j = Math.trunc(fround(x * FOUR_OVER_PI));
  j = (j + 1) & ~1;
  const y = j;
  const swapSin = (j & 4) !== 0;
  const sinPoly = (j & 2) === 0;
  const negCos = (~(j - 2) & 4) !== 0;
  // extended-precision reduction x − j·π/4 (Cody–Waite, three parts)
  x = fmaf(y, MINUS_DP1, x);
  x = fmaf(y, MINUS_DP2, x);
  x = fmaf(y, MINUS_DP3, x);
  const z = fround(x * x);
  // cos polynomial on [0, π/4]: 1 − z/2 + z²·P(z)
  let yc = COS_P[0];
  yc = fmaf(yc, z, COS_P[1]);
  yc = fmaf(yc, z, COS_P[2]);
  yc = fround(yc * z);
  yc = fmaf(yc, z, -fround(z * 0.5));
  yc = fround(yc + 1);
  // sin polynomial on [0, π/4]: x + x·z·Q(z)
  let ys = SIN_P[0];
  ys = fmaf(ys, z, SIN_P[1]);
  ys = fmaf(ys, z, SIN_P[2]);
  ys = fround(ys * z);
  ys = fmaf(ys, x, x);
  let s = sinPoly ? ys : yc;
  let c = sinPoly ? yc : ys;
  if (swapSin !== negative) s = -s;
  if (negCos) c = -c;
  return [s, c];
}
