import { deepStrictEqual, ok, strictEqual, throws } from "node:assert";
import { BAND_BYTES, resizeLanczos } from "./lanczos.ts";
import { maxDiff, readPilCases, sourceImage } from "../../tests/fixtures/pil_fixtures.ts";

const pil = readPilCases();
const cases = pil.cases.filter((c) => c.filter === "lanczos");

Deno.test(`resizeLanczos is bit-exact with PIL ${pil.pillow} Image.LANCZOS`, () => {
  ok(cases.length >= 20, `${cases.length} cases`);
  for (const c of cases) {
    const name = `${c.mode} ${c.kind} ${c.src.join("×")} → ${c.dst.join("×")}`;
    const src = sourceImage(c.kind, c.src[0], c.src[1], c.mode === "RGB" ? 3 : 1);
    strictEqual(src.data.reduce((a, b) => a + b, 0), c.inputSum, `${name}: input formula`);
    const out = resizeLanczos(src, c.dst[0], c.dst[1]);
    deepStrictEqual([out.width, out.height, out.channels], [...c.dst, src.channels], name);
    const expected = pil.expected(c);
    strictEqual(out.data.length, expected.length, name);
    // One grey level of difference from PIL would be acceptable; the implementation is exact.
    strictEqual(maxDiff(out.data, expected), 0, name);
  }
});

Deno.test("the fixtures cover shrinking, enlarging, mixed axes and one-pixel sides", () => {
  const up = (c: (typeof cases)[0]) => c.dst[0] > c.src[0] && c.dst[1] > c.src[1];
  const down = (c: (typeof cases)[0]) => c.dst[0] < c.src[0] && c.dst[1] < c.src[1];
  ok(cases.some(up) && cases.some(down));
  ok(cases.some((c) => !up(c) && !down(c)));
  ok(cases.some((c) => c.src[0] === 1) && cases.some((c) => c.src[1] === 1));
  ok(cases.some((c) => c.mode === "L") && cases.some((c) => c.mode === "RGB"));
  ok(cases.some((c) => c.kind === "edges"));
  // Tall images that shrink vertically take the vertical pass first (Pillow >= 12.2).
  ok(cases.some((c) => c.src[1] > 100 * c.src[0] && c.dst[1] < c.src[1] && c.dst[0] !== c.src[0]));
  // Inputs larger than one band of rows (lanczos.ts BAND_BYTES).
  ok(cases.some((c) => c.src[0] * c.src[1] * (c.mode === "RGB" ? 3 : 1) > 2 * BAND_BYTES));
});

Deno.test("resizeLanczos keeps a uniform image uniform and does not modify its input", () => {
  const flat = { width: 5, height: 3, channels: 3, data: new Uint8Array(45).fill(77) };
  const out = resizeLanczos(flat, 7, 11);
  deepStrictEqual(out.data, new Uint8Array(7 * 11 * 3).fill(77));
  deepStrictEqual(flat.data, new Uint8Array(45).fill(77));
  const same = resizeLanczos(flat, 5, 3);
  deepStrictEqual(same.data, flat.data);
  ok(same.data !== flat.data, "an unchanged size still returns a copy");
});

Deno.test("resizeLanczos overshoots at a hard edge and clips the lobes to 0..255", () => {
  const row = (lo: number, hi: number) => ({
    width: 12,
    height: 1,
    channels: 1,
    data: Uint8Array.from({ length: 12 }, (_, x) => (x < 6 ? lo : hi)),
  });
  // 64/192: the negative lobes leave the input range (unlike any convex interpolation).
  const grey = resizeLanczos(row(64, 192), 48, 1).data;
  const below = [...grey.keys()].filter((i) => grey[i] < 64);
  const above = [...grey.keys()].filter((i) => grey[i] > 192);
  ok(below.length > 0 && above.length > 0, `range ${Math.min(...grey)}..${Math.max(...grey)}`);
  // 0/255 is the same signal scaled by 255/128: there the lobes fall outside 0..255 and clip.
  const step = resizeLanczos(row(0, 255), 48, 1).data;
  ok(below.every((i) => step[i] === 0), `below: ${below.map((i) => step[i])}`);
  ok(above.every((i) => step[i] === 255), `above: ${above.map((i) => step[i])}`);
});

Deno.test("resizeLanczos rejects malformed images, other channel counts and bad sizes", () => {
  throws(
    () => resizeLanczos({ width: 2, height: 2, channels: 3, data: new Uint8Array(11) }, 4, 4),
    {
      name: "RangeError",
      message: /2×2×3 but has 11 bytes, expected 12/,
    },
  );
  throws(() => resizeLanczos({ width: 1, height: 1, channels: 4, data: new Uint8Array(4) }, 2, 2), {
    name: "RangeError",
    message: /1 or 3 channels/,
  });
  const img = sourceImage("noise", 3, 3, 1);
  throws(() => resizeLanczos(img, 0, 4), { name: "RangeError", message: /got 0×4/ });
  throws(() => resizeLanczos(img, 2.5, 4), { name: "RangeError", message: /got 2.5×4/ });
});
