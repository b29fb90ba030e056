/**
 * Integer helpers that reproduce OpenCV's C++ arithmetic in JavaScript
 * numbers: `cvRound` (round half to even), 64-bit arithmetic shifts and
 * truncating division. Every value stays below 2^53, so plain numbers are
 * exact; `>>` and `|` are avoided because they truncate to 32 bits.
 *
 * @module
 */

/**
 * OpenCV `cvRound`: on x86-64 it is `_mm_cvtsd_si32`, i.e. round to nearest
 * with ties to even (opencv `modules/core/include/opencv2/core/fast_math.hpp`).
 * NumPy's `np.round` rounds the same way.
 */
export function cvRound(x: number): number {
  const r = Math.round(x); // ties go up here
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** Arithmetic right shift of a (possibly negative, possibly > 32-bit) integer: `a >> n`. */
export function shr(a: number, n: number): number {
  return Math.floor(a / 2 ** n);
}

/** Left shift of an integer without 32-bit wrap-around: `a << n`. */
export function shl(a: number, n: number): number {
  return a * 2 ** n;
}

/**
 * C/C++ integer division (truncates toward zero), exact for |a|, |b| < 2^53
 * even where the floating-point quotient rounds across an integer.
 */
export function idiv(a: number, b: number): number {
  if (b === 0) throw new RangeError(`integer division by zero (${a} / 0)`);
  let q = Math.trunc(a / b);
  const step = Math.sign(a) * Math.sign(b);
  let r = a - q * b;
  // The true quotient leaves a remainder with the sign of `a` and |r| < |b|.
  while (r !== 0 && Math.sign(r) !== Math.sign(a)) {
    q -= step;
    r = a - q * b;
  }
  while (Math.abs(r) >= Math.abs(b)) {
    q += step;
    r = a - q * b;
  }
  return q;
}

/** `saturate_cast<uchar>` of an integer. */
export function clampU8(v: number): number {
  return v < 0 ? 0 : v > 255 ? 255 : v;
}

/** `saturate_cast<uchar>(double)`: `cvRound`, then clamp to 0..255. */
export function saturateU8(v: number): number {
  return clampU8(cvRound(v));
}
