import { ok, strictEqual } from "node:assert";
import { fmaf, logAvx, sinCosAvx } from "./avx_mathfun.ts";

Deno.test("avx_mathfun: log and sincos are float32-accurate approximations", () => {
  // cephes single-precision polynomials: a few float32 ulps of the true value
  for (let i = 1; i <= 2000; i++) {
    const x = Math.fround(i / 2000);
    const l = logAvx(x);
    strictEqual(l, Math.fround(l));
    ok(Math.abs(l - Math.log(x)) <= 4e-7 * Math.max(1, Math.abs(Math.log(x))), `log(${x}) = ${l}`);
    const t = Math.fround((2 * Math.PI * i) / 2000);
    const [s, c] = sinCosAvx(t);
    ok(Math.abs(s - Math.sin(t)) < 3e-7 && Math.abs(c - Math.cos(t)) < 3e-7, `sincos(${t})`);
  }
  strictEqual(logAvx(1), 0);
  const [s0, c0] = sinCosAvx(0);
  strictEqual(s0, 0);
  strictEqual(c0, 1);
  ok(sinCosAvx(-1)[0] < 0 && Math.abs(sinCosAvx(-1)[0] + Math.sin(1)) < 3e-7, "odd sine");
});

Deno.test("fmaf: one rounding, including the double-rounding tie", () => {
  strictEqual(fmaf(2, 3, 1), 7);
  // a·b = (2^30 + 1)·2^-54 = 2^-24 + 2^-54 exactly (65 · 16519105 = 2^30 + 1).
  // a·b + 1 in double drops the 2^-54 and lands on the float32 tie 1 + 2^-24,
  // which rounds to even (1); the exact sum is above the tie: 1 + 2^-23.
  const a = 65 / 64;
  const b = 16519105 * 2 ** -48;
  strictEqual(Math.fround(a), a);
  strictEqual(Math.fround(b), b);
  strictEqual(Math.fround(a * b + 1), 1);
  strictEqual(fmaf(a, b, 1), 1 + 2 ** -23);
  strictEqual(fmaf(-a, b, -1), -(1 + 2 ** -23));
});
