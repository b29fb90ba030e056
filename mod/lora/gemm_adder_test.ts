import { deepStrictEqual, ok } from "node:assert";
import { GemmAdder } from "./gemm_adder.ts";

const close = (a: ArrayLike<number>, b: readonly number[], what: string) => {
  deepStrictEqual(a.length, b.length, what);
  for (let i = 0; i < b.length; i++) {
    ok(Math.abs(a[i] - b[i]) < 1e-5, `${what}[${i}]: ${a[i]} vs ${b[i]}`);
  }
};

Deno.test("GemmAdder: W + up·down in torch layout, and its transpose for [in, out] weights", async () => {
  const adder = await GemmAdder.open();
  try {
    // Linear in=3, out=2, rank 2: up [2,2] (scale already in it), down [2,3].
    const up = Float32Array.of(1, 2, 3, 4);
    const down = Float32Array.of(1, 0, -1, 2, 1, 0);
    // By hand: up·down = [[1·1+2·2, 1·0+2·1, 1·(-1)+2·0], [3·1+4·2, 3·0+4·1, 3·(-1)+4·0]]
    //                 = [[5, 2, -1], [11, 4, -3]].
    const w = Float32Array.of(0.5, 0, 0, 0, 0, -1);
    const y = await adder.add(w, up, down, { rows: 2, cols: 3, rank: 2, transposed: false });
    close(y, [5.5, 2, -1, 11, 4, -4], "torch layout");
    // The same weight stored [in=3, out=2] (a MatMul's): W + (up·down)ᵀ.
    const wt = Float32Array.of(0.5, 0, 0, 0, 0, -1);
    const yt = await adder.add(wt, up, down, { rows: 2, cols: 3, rank: 2, transposed: true });
    close(yt, [5.5, 11, 2, 4, -1, -4], "transposed");
    // A 3×3 conv: down [rank=1, in·3·3 = 9], up [out=2, 1] → ΔW[o, k] = up[o]·down[k].
    const conv = await adder.add(
      new Float32Array(18),
      Float32Array.of(2, -1),
      Float32Array.of(1, 2, 3, 4, 5, 6, 7, 8, 9),
      { rows: 2, cols: 9, rank: 1, transposed: false },
    );
    close(conv, [2, 4, 6, 8, 10, 12, 14, 16, 18, -1, -2, -3, -4, -5, -6, -7, -8, -9], "conv");
  } finally {
    await adder.release();
  }
});
