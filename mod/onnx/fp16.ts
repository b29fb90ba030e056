/**
 * IEEE 754 binary16 ("half") <-> binary32 bit conversion. ONNX Runtime takes
 * and returns float16 tensors as raw 16-bit patterns (`Uint16Array`), so fp16
 * models need this at their I/O.
 *
 * fp32 -> fp16 rounds to nearest, ties to even (the IEEE default, and what
 * numpy's `astype(np.float16)` does), overflows to ±Infinity, keeps NaN a
 * quiet NaN, and produces subnormals below 2^-14.
 *
 * @module
 */

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** Converts one number to the binary16 bit pattern nearest to its float32 value. */
export function toFloat16Bits(value: number): number {
  f32[0] = value;
  const x = u32[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;

  if (exp === 0xff) {
    // Infinity keeps a zero mantissa; any NaN becomes a quiet NaN.
    return sign | 0x7c00 | (mant !== 0 ? 0x200 : 0);
  }
  // Unbiased exponent e = exp - 127; half bias is 15.
  const e = exp - 127;
  if (e > 15) return sign | 0x7c00; // too large even before rounding
  if (e >= -14) {
    // Normal half: keep 10 of the 23 mantissa bits, round the 13 dropped bits.
    let half = ((e + 15) << 10) | (mant >>> 13);
    const rest = mant & 0x1fff;
    if (rest > 0x1000 || (rest === 0x1000 && (half & 1) === 1)) half += 1; // may carry into exp (ok, up to Inf)
    return sign | half;
  }
  if (e < -25) return sign; // below half of the smallest subnormal: rounds to zero
  // Subnormal half: value = mant' * 2^-24. Make the implicit leading 1 explicit.
  mant |= 0x800000;
  const shift = -e - 14 + 13; // bits to drop: 14 + 13 .. 25 + 13
  let half = mant >>> shift;
  const rest = mant & ((1 << shift) - 1);
  const halfway = 1 << (shift - 1);
  if (rest > halfway || (rest === halfway && (half & 1) === 1)) half += 1;
  return sign | half;
}

/** Converts one binary16 bit pattern to its (exact) number value. */
export function fromFloat16Bits(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exp = (bits >>> 10) & 0x1f;
  const mant = bits & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant === 0 ? sign * Infinity : NaN;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** Converts float values to binary16 bit patterns (round to nearest even). */
export function float32ToFloat16Bits(values: ArrayLike<number>): Uint16Array {
  const out = new Uint16Array(values.length);
  for (let i = 0; i < values.length; i++) out[i] = toFloat16Bits(values[i]);
  return out;
}

/** Converts binary16 bit patterns to float32 values (exact). */
export function float16BitsToFloat32(bits: ArrayLike<number>): Float32Array {
  const out = new Float32Array(bits.length);
  for (let i = 0; i < bits.length; i++) out[i] = fromFloat16Bits(bits[i]);
  return out;
}
