import { deepStrictEqual, rejects, strictEqual } from "node:assert";
import { MapWeights, RandomWeights, transpose, type WeightEntry } from "./weights.ts";
import { Rng } from "./rng.ts";

const entry = (shape: number[], values: number[]): WeightEntry => ({
  dtype: "F16",
  shape,
  read: () => Promise.resolve(Float32Array.from(values)),
});

Deno.test("MapWeights: a torch Linear [out, in] becomes the MatMul's [in, out]; norms and 1×1 convs fit", async () => {
  const map = new Map<string, WeightEntry>([
    // Linear 3 → 2: W = [[1, 2, 3], [4, 5, 6]] (out 2, in 3).
    ["a.weight", entry([2, 3], [1, 2, 3, 4, 5, 6])],
    ["n.weight", entry([2], [7, 8])],
    ["p.weight", entry([2, 2], [1, 2, 3, 4])], // a Linear given for a 1×1 conv
    ["extra", entry([1], [0])],
  ]);
  const src = new MapWeights(map);
  const lin = src.tensor({
    hint: "a",
    name: "a.weight",
    dims: [3, 2],
    layout: "transposed",
    init: { uniform: 1 },
  });
  const norm = src.tensor({
    hint: "n",
    name: "n.weight",
    dims: [2, 1, 1],
    layout: "same",
    init: { fill: 1 },
  });
  const conv = src.tensor({
    hint: "p",
    name: "p.weight",
    dims: [2, 2, 1, 1],
    layout: "same",
    init: { uniform: 1 },
  });
  deepStrictEqual(src.problems(), []);
  const read = async (d: unknown) => Array.from(await (d as () => Promise<Float32Array>)());
  deepStrictEqual(await read(lin), [1, 4, 2, 5, 3, 6], "x·Wᵀ: row i of [in, out] is column i of W");
  deepStrictEqual(await read(norm), [7, 8]);
  deepStrictEqual(await read(conv), [1, 2, 3, 4]);
  deepStrictEqual(src.unused(), ["extra"]);
});

Deno.test("MapWeights: missing and mis-shaped tensors are problems, named", async () => {
  const src = new MapWeights(new Map([["a.weight", entry([3, 2], [1, 2, 3, 4, 5, 6])]]));
  const bad = src.tensor({
    hint: "a",
    name: "a.weight",
    dims: [3, 2],
    layout: "transposed",
    init: { uniform: 1 },
  });
  const missing = src.tensor({
    hint: "b",
    name: "b.bias",
    dims: [4],
    layout: "same",
    init: { uniform: 1 },
  });
  deepStrictEqual(src.problems(), [
    { name: "a.weight", problem: "shape [3, 2], expected [2, 3]" },
    { name: "b.bias", problem: "missing" },
  ]);
  strictEqual(typeof bad, "function");
  await rejects((missing as () => Promise<Float32Array>)(), /b\.bias is missing/);
});

Deno.test("RandomWeights: one seed, the same lazy values within the bound; constants filled", () => {
  const req = { hint: "w", name: "w", dims: [4, 5], layout: "same" as const };
  const lazy = new RandomWeights(new Rng(1, "s"), true).tensor({ ...req, init: { uniform: 0.5 } });
  const again = new RandomWeights(new Rng(1, "s"), true).tensor({ ...req, init: { uniform: 0.5 } });
  const a = (lazy as () => Float32Array)();
  deepStrictEqual(a, (again as () => Float32Array)());
  strictEqual(a.length, 20);
  strictEqual(a.every((v) => Math.abs(v) <= 0.5), true);
  const fill = new RandomWeights(new Rng(1, "s")).tensor({ ...req, init: { fill: 1 } });
  deepStrictEqual(Array.from((fill as () => Float32Array)()), new Array(20).fill(1));
  deepStrictEqual(Array.from(transpose(Float32Array.of(1, 2, 3, 4, 5, 6), 2, 3)), [
    1,
    4,
    2,
    5,
    3,
    6,
  ]);
});
