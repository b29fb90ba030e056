import { deepStrictEqual, ok, strictEqual, throws } from "node:assert";
import {
  castFloatTensor,
  floatTensor,
  intTensor,
  numericTensor,
  scalarTensor,
  timestepTensor,
  toFloat32,
} from "./tensors.ts";

Deno.test("floatTensor: float32 as is, float16 as IEEE half bits", () => {
  const data = Float32Array.from([1, -2, 0.5, 65504]);
  const t32 = floatTensor("float32", data, [2, 2]);
  strictEqual(t32.type, "float32");
  deepStrictEqual(t32.dims, [2, 2]);
  deepStrictEqual(Array.from(t32.data as Float32Array), [1, -2, 0.5, 65504]);
  const t16 = floatTensor("float16", data, [4]);
  strictEqual(t16.type, "float16");
  // Bit patterns stay in a Uint16Array (runtime.ts pins this for Deno's N-API).
  ok(t16.data instanceof Uint16Array);
  deepStrictEqual(Array.from(t16.data as Uint16Array), [0x3c00, 0xc000, 0x3800, 0x7bff]);
  deepStrictEqual(Array.from(toFloat32(t16)), [1, -2, 0.5, 65504]);
  throws(() => floatTensor("int8", data, [4]), /unsupported float dtype int8/);
  throws(() => floatTensor("float32", data, [3]), /4 values do not fill shape \[3\]/);
});

Deno.test("intTensor: int32 and int64 (BigInt64Array), truncating like numpy astype", () => {
  const a = intTensor("int32", [49406, 320, 49407], [1, 3]);
  strictEqual(a.type, "int32");
  deepStrictEqual(Array.from(a.data as Int32Array), [49406, 320, 49407]);
  const b = intTensor("int64", [49406, 951.9, -1.5], [3]);
  strictEqual(b.type, "int64");
  ok(b.data instanceof BigInt64Array);
  deepStrictEqual(Array.from(b.data as BigInt64Array), [49406n, 951n, -1n]);
  throws(() => intTensor("float32", [1], [1]), /unsupported integer dtype float32/);
});

Deno.test("timestepTensor: shape per kind and dtype per declaration", () => {
  const batch = timestepTensor({ dtype: "float32", kind: "batch" }, 951, 2);
  deepStrictEqual(batch.dims, [2]);
  deepStrictEqual(Array.from(batch.data as Float32Array), [951, 951]);
  const steps = timestepTensor({ dtype: "int64", kind: "steps" }, 951, 2);
  deepStrictEqual(steps.dims, [2]);
  deepStrictEqual(Array.from(steps.data as BigInt64Array), [951n, 951n]);
  const one = timestepTensor({ dtype: "float16", kind: "one" }, 951, 2);
  deepStrictEqual(one.dims, [1]);
  deepStrictEqual(Array.from(toFloat32(one)), [951]); // 951 is exact in fp16 (< 2048)
  const scalar = timestepTensor({ dtype: "float32", kind: "scalar" }, 946.42, 2);
  deepStrictEqual(scalar.dims, []);
  strictEqual(scalar.size, 1);
  strictEqual((scalar.data as Float32Array)[0], Math.fround(946.42));
});

Deno.test("scalarTensor: rank follows the declared shape; double stays double", () => {
  const s1 = scalarTensor("float64", 0.75, [1]);
  strictEqual(s1.type, "float64");
  deepStrictEqual(s1.dims, [1]);
  strictEqual((s1.data as Float64Array)[0], 0.75);
  deepStrictEqual(scalarTensor("float64", 0.75, []).dims, []);
  throws(() => scalarTensor("float64", 1, [1, 1]), /rank 0 or 1/);
});

Deno.test("toFloat32 and castFloatTensor convert between float types", () => {
  const t = numericTensor("float64", [0.1, 2], [2]);
  deepStrictEqual(Array.from(toFloat32(t)), [Math.fround(0.1), 2]);
  const h = castFloatTensor(floatTensor("float32", Float32Array.from([1.5, -3]), [2]), "float16");
  strictEqual(h.type, "float16");
  deepStrictEqual(Array.from(toFloat32(h)), [1.5, -3]);
  const same = floatTensor("float32", Float32Array.from([1]), [1]);
  strictEqual(castFloatTensor(same, "float32"), same);
  throws(() => toFloat32(intTensor("int32", [1], [1])), /expected a float tensor, got int32/);
});
