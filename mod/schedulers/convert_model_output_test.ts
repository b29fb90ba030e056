import { deepStrictEqual, ok, strictEqual } from "node:assert";
import {
  clipSample,
  epsilonFromV,
  predictOriginalSigma,
  predictOriginalVp,
} from "./convert_model_output.ts";

// A clean latent and a noise draw, noised by hand in float64 below; each
// conversion must recover the part it claims to.
const x0 = [0.5, -1.25, 2, 0];
const eps = [1, 0.25, -0.75, -2];

function close(actual: ArrayLike<number>, expected: number[], tol = 1e-5): void {
  strictEqual(actual.length, expected.length);
  for (let i = 0; i < expected.length; i++) {
    ok(Math.abs(actual[i] - expected[i]) <= tol, `[${i}] ${actual[i]} vs ${expected[i]}`);
  }
}

Deno.test("convert_model_output: VP epsilon and v predictions recover x0 and ε", () => {
  const abar = 0.36; // α = 0.6, σ = 0.8
  const a = Math.sqrt(abar), s = Math.sqrt(1 - abar);
  const xt = new Float32Array(x0.map((v, i) => a * v + s * eps[i]));
  // v = α ε − σ x0 (Salimans & Ho 2022, "Progressive Distillation", §4).
  const v = new Float32Array(x0.map((v0, i) => a * eps[i] - s * v0));
  close(predictOriginalVp("epsilon", a, s, new Float32Array(eps), xt), x0);
  close(predictOriginalVp("v_prediction", a, s, v, xt), x0);
  close(epsilonFromV(a, s, v, xt), eps);
});

Deno.test("convert_model_output: sigma-space x0 for epsilon and v predictions", () => {
  const sigma = 3;
  const xs = new Float32Array(x0.map((v, i) => v + sigma * eps[i]));
  close(predictOriginalSigma("epsilon", sigma, new Float32Array(eps), xs), x0);
  // In sigma space the VP latent is xs / sqrt(σ²+1), with α = 1/sqrt(σ²+1), σ_vp = σ α.
  const alpha = 1 / Math.sqrt(sigma * sigma + 1);
  const v = new Float32Array(x0.map((v0, i) => alpha * eps[i] - sigma * alpha * v0));
  close(predictOriginalSigma("v_prediction", sigma, v, xs), x0);
});

Deno.test("convert_model_output: clipSample clamps to ±range", () => {
  deepStrictEqual(
    Array.from(clipSample(new Float32Array([-3, -0.5, 0, 0.5, 3]), 1)),
    [-1, -0.5, 0, 0.5, 1],
  );
});
