import { deepStrictEqual, ok, strictEqual, throws } from "node:assert";
import { resizeNearest } from "./nearest.ts";
import { maxDiff, readPilCases, sourceImage } from "../../tests/fixtures/pil_fixtures.ts";

const pil = readPilCases();
const cases = pil.cases.filter((c) => c.filter === "nearest");

Deno.test(`resizeNearest is bit-exact with PIL ${pil.pillow} Image.NEAREST`, () => {
  ok(cases.length >= 5, `${cases.length} cases`);
  for (const c of cases) {
    const name = `${c.mode} ${c.kind} ${c.src.join("×")} → ${c.dst.join("×")}`;
    const src = sourceImage(c.kind, c.src[0], c.src[1], c.mode === "RGB" ? 3 : 1);
    strictEqual(src.data.reduce((a, b) => a + b, 0), c.inputSum, `${name}: input formula`);
    const out = resizeNearest(src, c.dst[0], c.dst[1]);
    deepStrictEqual([out.width, out.height, out.channels], [...c.dst, src.channels], name);
    strictEqual(out.data.length, pil.expected(c).length, name);
    strictEqual(maxDiff(out.data, pil.expected(c)), 0, name);
  }
});

Deno.test("resizeNearest samples pixel centres: [200, 0] → 512 splits at 256", () => {
  const src = { width: 2, height: 1, channels: 1, data: Uint8Array.from([200, 0]) };
  const out = resizeNearest(src, 512, 1);
  deepStrictEqual(Array.from(out.data), Array.from({ length: 512 }, (_, x) => (x < 256 ? 200 : 0)));
  // 3 → 2 takes input columns trunc(0.75) = 0 and trunc(2.25) = 2.
  const three = { width: 3, height: 1, channels: 1, data: Uint8Array.from([1, 2, 3]) };
  deepStrictEqual(Array.from(resizeNearest(three, 2, 1).data), [1, 3]);
});

Deno.test("resizeNearest copies at an unchanged size and rejects bad input", () => {
  const img = sourceImage("pattern", 4, 3, 3);
  const same = resizeNearest(img, 4, 3);
  deepStrictEqual(same.data, img.data);
  ok(same.data !== img.data);
  throws(() => resizeNearest({ width: 2, height: 2, channels: 1, data: new Uint8Array(3) }, 1, 1), {
    name: "RangeError",
  });
  throws(() => resizeNearest(img, 1, -1), { name: "RangeError", message: /got 1×-1/ });
});
