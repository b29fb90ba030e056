import { deepStrictEqual, rejects, strictEqual } from "node:assert";
import { decodeImageInput, toMask, toRgbImage } from "./decode.ts";
import { maxDiff, readPilCases, sourceImage } from "../../tests/fixtures/pil_fixtures.ts";
import { resizeRgb } from "./resize.ts";
import { type RawPixels, sharpLib } from "./sharp.ts";

/** A 3×2 image with distinct pixels. */
const SOURCE = {
  width: 3,
  height: 2,
  data: Uint8Array.from([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18]),
};

Deno.test("nearest 2× upscale replicates every pixel into a 2×2 block", async () => {
  const out = await resizeRgb(SOURCE, 6, 4, "nearest");
  const expected: number[] = [];
  for (let y = 0; y < 4; y++) {
    for (let x = 0; x < 6; x++) {
      const i = (Math.floor(y / 2) * 3 + Math.floor(x / 2)) * 3;
      expected.push(...SOURCE.data.subarray(i, i + 3));
    }
  }
  deepStrictEqual(out, { width: 6, height: 4, data: Uint8Array.from(expected) });
});

Deno.test("every kernel keeps a uniform image uniform and stretches to any size", async () => {
  const uniform = { width: 5, height: 3, data: new Uint8Array(45).fill(77) };
  for (const kernel of ["lanczos3", "nearest", "linear", "cubic"] as const) {
    const out = await resizeRgb(uniform, 7, 11, kernel);
    deepStrictEqual(out, { width: 7, height: 11, data: new Uint8Array(7 * 11 * 3).fill(77) });
  }
});

Deno.test("resizeRgb does not modify its input", async () => {
  const copy = new Uint8Array(SOURCE.data);
  await resizeRgb(SOURCE, 2, 2, "lanczos3");
  deepStrictEqual(SOURCE.data, copy);
});

Deno.test("resizeRgb rejects a malformed image and a bad target size", async () => {
  await rejects(resizeRgb({ width: 2, height: 2, data: new Uint8Array(11) }, 4, 4, "linear"), {
    name: "RangeError",
  });
  await rejects(resizeRgb(SOURCE, 0, 4, "linear"), { name: "RangeError" });
  await rejects(resizeRgb(SOURCE, 2.5, 4, "linear"), { name: "RangeError" });
});

Deno.test("toRgbImage and toMask of lossless PNGs match PIL's resize of the same pixels", async () => {
  const pil = readPilCases();
  const png = async (image: RawPixels) => {
    const channels = image.channels as 1 | 3;
    const bytes = await sharpLib(image.data, {
      raw: { width: image.width, height: image.height, channels },
    }).png().toBuffer();
    return decodeImageInput("input_image", `data:image/png;base64,${bytes.toString("base64")}`);
  };
  const picked = pil.cases.filter((c) =>
    (c.filter === "lanczos" && c.mode === "RGB" && c.kind === "edges" && c.src[1] > 1) ||
    (c.filter === "nearest" && c.mode === "L" && c.kind === "noise" && c.dst[0] > 100)
  );
  strictEqual(picked.length, 7);
  for (const c of picked) {
    const name = `${c.filter} ${c.src.join("×")} → ${c.dst.join("×")}`;
    const source = sourceImage(c.kind, c.src[0], c.src[1], c.mode === "RGB" ? 3 : 1);
    const decoded = await png(source);
    const expected = pil.expected(c);
    if (c.filter === "lanczos") {
      const image = await toRgbImage(decoded, c.dst[0], c.dst[1]);
      strictEqual(maxDiff(image.data, expected), 0, name);
    } else {
      const mask = await toMask(decoded, c.dst[0], c.dst[1]);
      deepStrictEqual(mask.data, expected.map((v) => (v > 127 ? 1 : 0)), name);
    }
  }
});
