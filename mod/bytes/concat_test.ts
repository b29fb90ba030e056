import assert from "node:assert/strict";
import { concatBytes } from "./concat.ts";

Deno.test("concatBytes joins the parts in order into a new array", () => {
  const a = Uint8Array.of(1, 2);
  const b = new Uint8Array([9, 3, 4, 9]).subarray(1, 3);
  const out = concatBytes([a, new Uint8Array(), b]);
  assert.deepEqual([...out], [1, 2, 3, 4]);
  out[0] = 7;
  assert.equal(a[0], 1, "the result does not share the first part's buffer");
});

Deno.test("concatBytes of nothing is empty", () => {
  assert.equal(concatBytes([]).length, 0);
});
