import { deepStrictEqual, ok, strictEqual, throws } from "node:assert";
import { applyGuidance, guidanceScaleEmbedding } from "./guidance.ts";

Deno.test("applyGuidance: uncond + g·(text − uncond), uncond first", () => {
  // batch 2 of two values: uncond = [1, -2], text = [3, 0.5]
  const out = applyGuidance(new Float32Array([1, -2, 3, 0.5]), 7.5);
  // 1 + 7.5·2 = 16; −2 + 7.5·2.5 = 16.75
  deepStrictEqual(Array.from(out), [16, 16.75]);
  // g = 1 returns the text prediction
  deepStrictEqual(Array.from(applyGuidance(new Float32Array([1, -2, 3, 0.5]), 1)), [3, 0.5]);
  throws(() => applyGuidance(new Float32Array(3), 2), /even length/);
});

Deno.test("guidanceScaleEmbedding: [sin(w·f), cos(w·f)], w = (g−1)·1000, f_i = 10000^(−i/(half−1))", () => {
  const g = 8.5;
  const dim = 6;
  const emb = guidanceScaleEmbedding(g, dim);
  strictEqual(emb.length, dim);
  const w = (g - 1) * 1000; // 7500
  const freqs = [1, 10000 ** -0.5, 10000 ** -1]; // half = 3
  for (let i = 0; i < 3; i++) {
    // float32 rounding of w·f moves the argument by at most ~5e-4 rad at w = 7500.
    ok(Math.abs(emb[i] - Math.sin(w * freqs[i])) < 2e-3, `sin ${i}: ${emb[i]}`);
    ok(Math.abs(emb[3 + i] - Math.cos(w * freqs[i])) < 2e-3, `cos ${i}: ${emb[3 + i]}`);
  }
  // The last frequency is exactly 1e-4: 7500e-4 = 0.75.
  ok(Math.abs(emb[2] - Math.sin(0.75)) < 1e-6);
  ok(Math.abs(emb[5] - Math.cos(0.75)) < 1e-6);
});

Deno.test("guidanceScaleEmbedding: g = 1 gives sin 0 = 0 and cos 0 = 1; odd dim pads one zero", () => {
  const emb = guidanceScaleEmbedding(1, 5);
  deepStrictEqual(Array.from(emb), [0, 0, 1, 1, 0]);
  throws(() => guidanceScaleEmbedding(2, 1), /dim must be/);
});
