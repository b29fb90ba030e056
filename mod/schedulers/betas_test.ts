import { deepStrictEqual, ok, strictEqual } from "node:assert";
import { alphasCumprod, makeBetas, sigmasFromAlphasCumprod, torchLinspaceF32 } from "./betas.ts";
import {
  alphasCumprod64,
  assertClose,
  decodeF32,
  torchBetasFixture,
} from "./testdata/reference.ts";

const fixture = torchBetasFixture();
const torchDefault = fixture.default;

Deno.test("betas: scaled_linear and linear betas equal real torch float32 (portable kernel)", () => {
  deepStrictEqual(
    makeBetas("scaled_linear", 0.00085, 0.012, 1000),
    decodeF32(torchDefault.scaled_linear_betas),
  );
  deepStrictEqual(makeBetas("linear", 0.0001, 0.02, 1000), decodeF32(torchDefault.linear_betas));
});

Deno.test("betas: alphas_cumprod and sigmas equal real torch float32", () => {
  const ac = alphasCumprod(makeBetas("scaled_linear", 0.00085, 0.012, 1000));
  deepStrictEqual(ac, decodeF32(torchDefault.alphas_cumprod));
  deepStrictEqual(
    alphasCumprod(makeBetas("linear", 0.0001, 0.02, 1000)),
    decodeF32(torchDefault.linear_alphas_cumprod),
  );
  deepStrictEqual(sigmasFromAlphasCumprod(ac), decodeF32(torchDefault.sigmas));
  // np.log on float32: allow one float32 ulp (|log σ| < 3, ulp ≤ 2.4e-7).
  const logs = sigmasFromAlphasCumprod(ac).map((s) => Math.log(s));
  assertClose(logs, decodeF32(torchDefault.log_sigmas), 2.4e-7, "log sigmas");
});

Deno.test("betas: within 1e-6 (relative) of torch's AVX2 and AVX-512 builds", () => {
  const ac = alphasCumprod(makeBetas("scaled_linear", 0.00085, 0.012, 1000));
  for (const kernel of ["avx2", "avx512"]) {
    // A few float32 ulps: the betas differ in their last bit and the product drifts.
    assertClose(ac, decodeF32(fixture[kernel].alphas_cumprod), 0, `${kernel} ᾱ`, 1e-6);
    assertClose(
      makeBetas("scaled_linear", 0.00085, 0.012, 1000),
      decodeF32(fixture[kernel].scaled_linear_betas),
      0,
      `${kernel} betas`,
      // one ulp in the float32 root is two in its square
      5e-7,
    );
  }
});

Deno.test("betas: SD 1.5 published values and the float64 definition", () => {
  const ac = alphasCumprod(makeBetas("scaled_linear", 0.00085, 0.012, 1000));
  // From diffusers' scaled_linear betas (0.00085..0.012, 1000 steps): ac[0] ≈ 0.99915, ac[999] ≈ 0.004660, σ_min ≈ 0.029167, σ_max ≈ 14.6146
  strictEqual(Number(ac[0].toFixed(5)), 0.99915);
  strictEqual(Number(ac[999].toFixed(6)), 0.00466);
  const sigmas = sigmasFromAlphasCumprod(ac);
  ok(Math.abs(sigmas[0] - 0.029167) < 1e-6, `σ_min ${sigmas[0]}`);
  ok(Math.abs(sigmas[999] - 14.6146) < 1e-4, `σ_max ${sigmas[999]}`);
  assertClose(ac, alphasCumprod64(), 0, "ᾱ vs float64", 2e-6);
});

Deno.test("torchLinspaceF32: endpoints, symmetry of the two halves, small sizes", () => {
  const v = torchLinspaceF32(0, 1, 5);
  deepStrictEqual(Array.from(v), [0, 0.25, 0.5, 0.75, 1]);
  deepStrictEqual(Array.from(torchLinspaceF32(3, 7, 1)), [3]);
  const long = torchLinspaceF32(-2, 5, 37);
  strictEqual(long[0], -2);
  strictEqual(long[36], 5);
  for (let i = 1; i < long.length; i++) ok(long[i] > long[i - 1], `not increasing at ${i}`);
});
