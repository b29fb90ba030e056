import { deepStrictEqual, ok, strictEqual } from "node:assert";
import {
  float16BitsToFloat32,
  float32ToFloat16Bits,
  fromFloat16Bits,
  toFloat16Bits,
} from "./fp16.ts";

// Bit patterns from the IEEE 754 binary16 examples (Wikipedia "Half-precision
// floating-point format", "Half precision examples").
const PUBLISHED: [number, number][] = [
  [0, 0x0000],
  [-0, 0x8000],
  [1, 0x3c00],
  [-2, 0xc000],
  [65504, 0x7bff], // largest normal
  [2 ** -14, 0x0400], // smallest positive normal
  [2 ** -24, 0x0001], // smallest positive subnormal
  [2 ** -14 - 2 ** -24, 0x03ff], // largest subnormal
  [1 + 2 ** -10, 0x3c01], // smallest number larger than one
  [Infinity, 0x7c00],
  [-Infinity, 0xfc00],
];

Deno.test("toFloat16Bits: published binary16 bit patterns", () => {
  for (const [value, bits] of PUBLISHED) strictEqual(toFloat16Bits(value), bits, `value ${value}`);
  strictEqual(toFloat16Bits(1 / 3), 0x3555); // "0 01101 0101010101 = 0.333251953125"
});

Deno.test("toFloat16Bits: ties round to even, overflow to Infinity, NaN stays NaN", () => {
  strictEqual(toFloat16Bits(1 + 2 ** -11), 0x3c00); // halfway between 0x3c00 and 0x3c01 → even
  strictEqual(toFloat16Bits(1 + 3 * 2 ** -11), 0x3c02); // halfway between 0x3c01 and 0x3c02 → even
  strictEqual(toFloat16Bits(2 ** -25), 0x0000); // half the smallest subnormal → 0 (even)
  strictEqual(toFloat16Bits(3 * 2 ** -25), 0x0002); // between subnormals 1 and 2 → 2 (even)
  strictEqual(toFloat16Bits(65520), 0x7c00); // halfway to 2^16 rounds up to Infinity
  strictEqual(toFloat16Bits(65519), 0x7bff);
  strictEqual(toFloat16Bits(1e10), 0x7c00);
  strictEqual(toFloat16Bits(1e-10), 0x0000);
  const nan = toFloat16Bits(NaN);
  strictEqual(nan & 0x7c00, 0x7c00);
  ok((nan & 0x3ff) !== 0, "NaN keeps a non-zero mantissa");
});

Deno.test("fromFloat16Bits: exact values of every bit pattern round-trip", () => {
  for (const [value, bits] of PUBLISHED) strictEqual(Object.is(fromFloat16Bits(bits), value), true);
  ok(Number.isNaN(fromFloat16Bits(0x7e00)));
  for (let bits = 0; bits < 0x10000; bits++) {
    const v = fromFloat16Bits(bits);
    if (Number.isNaN(v)) continue;
    strictEqual(toFloat16Bits(v), bits, `bits 0x${bits.toString(16)}`);
  }
});

Deno.test("toFloat16Bits agrees with the engine's Float16Array (an independent rounding)", () => {
  const F16 = (globalThis as {
    Float16Array?: new (n: number) => ArrayLike<number> & { buffer: ArrayBuffer };
  })
    .Float16Array;
  ok(F16, "this Deno has Float16Array");
  const values: number[] = [];
  let state = 12345;
  for (let i = 0; i < 20000; i++) {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    const mant = state / 2 ** 32;
    const exp = (i % 50) - 30; // covers subnormals, normals and overflow
    // fround: both sides must round the same float32 value.
    values.push(Math.fround((i % 2 ? -1 : 1) * mant * 2 ** exp));
  }
  const arr = new F16(values.length) as unknown as { [i: number]: number; buffer: ArrayBuffer };
  values.forEach((v, i) => (arr[i] = v));
  deepStrictEqual(float32ToFloat16Bits(Float32Array.from(values)), new Uint16Array(arr.buffer));
});

Deno.test("array helpers convert element-wise", () => {
  deepStrictEqual(float32ToFloat16Bits([1, -2, 0.5]), Uint16Array.from([0x3c00, 0xc000, 0x3800]));
  deepStrictEqual(float16BitsToFloat32([0x3c00, 0xc000, 0x3800]), Float32Array.from([1, -2, 0.5]));
});
