import { deepStrictEqual, ok, rejects, strictEqual } from "node:assert";
import { ToolError } from "../mcp/tool.ts";
import { SIZES } from "../pipeline/types.ts";
import { closestAspect } from "./aspect.ts";
import { decodeImageInput, toMask, toRgbImage, toRgbImageClosest } from "./decode.ts";
import { readJpegHeader } from "./jpeg_header.ts";
import { readPngHeader } from "./png_header.ts";
import { resizeRgb } from "./resize.ts";
import { decodeRgb, sharpLib as sharp } from "./sharp.ts";

type Channels = 1 | 2 | 3 | 4;

/** Encodes raw 8-bit pixels with sharp; `finish` picks format and options. */
async function encode(
  pixels: number[] | Uint8Array | Uint16Array,
  width: number,
  height: number,
  channels: Channels,
  finish: (s: ReturnType<typeof sharp>) => ReturnType<typeof sharp>,
): Promise<Uint8Array> {
  const data = Array.isArray(pixels) ? Uint8Array.from(pixels) : pixels;
  return new Uint8Array(await finish(sharp(data, { raw: { width, height, channels } })).toBuffer());
}

/** Raw base64 of bytes, with the native encoder (independent of base64.ts). */
function b64(bytes: Uint8Array): string {
  return bytes.toBase64();
}

async function rejectsImage(promise: Promise<unknown>, ...parts: string[]): Promise<void> {
  await rejects(promise, (error: unknown) => {
    ok(error instanceof ToolError, `expected ToolError, got ${error}`);
    strictEqual(error.category, "image");
    for (const part of parts) {
      ok(error.message.includes(part), `message ${JSON.stringify(error.message)} lacks ${part}`);
    }
    return true;
  });
}

/** The RGB triple at (x, y). */
function px(image: { width: number; data: Uint8Array }, x: number, y: number): number[] {
  const i = (y * image.width + x) * 3;
  return Array.from(image.data.subarray(i, i + 3));
}

function near(actual: number[], expected: number[], tolerance: number, what: string): void {
  ok(
    actual.every((v, i) => Math.abs(v - expected[i]) <= tolerance),
    `${what}: ${actual} not within ${tolerance} of ${expected}`,
  );
}

/** Smallest and largest value (no spread: arrays are too long for call arguments). */
function range(data: Uint8Array): [number, number] {
  let min = 255, max = 0;
  for (const v of data) {
    if (v < min) min = v;
    if (v > max) max = v;
  }
  return [min, max];
}

/** A 4×2 RGB PNG with distinct pixels. */
const SMALL = [
  ...[255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 0],
  ...[0, 255, 255, 255, 0, 255, 10, 20, 30, 200, 100, 50],
];

Deno.test("raw base64 and every accepted data URI form decode to the same header", async () => {
  const png = await encode(SMALL, 4, 2, 3, (s) => s.png());
  const jpeg = await encode(SMALL, 4, 2, 3, (s) => s.jpeg());
  const cases: Array<[string, string]> = [
    [b64(png), "png"],
    ["data:image/png;base64," + b64(png), "png"],
    ["data:image/jpeg;base64," + b64(jpeg), "jpeg"],
    ["data:image/jpg;base64," + b64(jpeg), "jpeg"],
    ["DATA:IMAGE/JPEG;BASE64," + b64(jpeg), "jpeg"],
    [b64(jpeg), "jpeg"],
  ];
  for (const [value, format] of cases) {
    const decoded = await decodeImageInput("input_image", value);
    strictEqual(decoded.format, format, value.slice(0, 30));
    strictEqual(decoded.width, 4);
    strictEqual(decoded.height, 2);
    deepStrictEqual(decoded.bytes, format === "png" ? png : jpeg);
  }
});

Deno.test("the data URI prefix does not count towards the 36,000,000-character limit", async () => {
  // 36,000,000 payload characters + a 22-character prefix: the length check
  // passes and the (all-zero) bytes fail at format detection instead.
  const value = "data:image/png;base64," + "A".repeat(36_000_000);
  await rejectsImage(decodeImageInput("input_image", value), "unsupported image format");
  await rejectsImage(
    decodeImageInput("input_image", "data:image/png;base64," + "A".repeat(36_000_004)),
    "36,000,004 characters long",
  );
});

Deno.test("unsupported data URI type, mismatch and GIF are rejected before decoding", async () => {
  const png = await encode(SMALL, 4, 2, 3, (s) => s.png());
  const gif = await encode(SMALL, 4, 2, 3, (s) => s.gif());
  await rejectsImage(
    decodeImageInput("input_image", "data:image/gif;base64," + b64(gif)),
    '"image/gif" is not supported',
  );
  await rejectsImage(
    decodeImageInput("mask_image", "data:image/jpeg;base64," + b64(png)),
    "mask_image",
    "declares image/jpeg but the bytes are PNG",
  );
  await rejectsImage(decodeImageInput("input_image", b64(gif)), "looks like GIF");
  const webp = await encode(SMALL, 4, 2, 3, (s) => s.webp());
  await rejectsImage(decodeImageInput("input_image", b64(webp)), "looks like WebP");
});

Deno.test("an oversized PNG header is rejected by decodeImageInput without decoding", async () => {
  // A real 4×2 PNG whose IHDR is rewritten to 100000×100000 with a valid CRC:
  // the header check must stop it (sharp would report its own pixel-limit text).
  const png = await encode(SMALL, 4, 2, 3, (s) => s.png());
  const view = new DataView(png.buffer, png.byteOffset);
  view.setUint32(16, 100000);
  view.setUint32(20, 100000);
  let crc = 0xffffffff; // table-less bitwise CRC-32
  for (const byte of png.subarray(12, 29)) {
    crc ^= byte;
    for (let k = 0; k < 8; k++) crc = (crc >>> 1) ^ (0xedb88320 & -(crc & 1));
  }
  view.setUint32(29, (crc ^ 0xffffffff) >>> 0);
  await rejectsImage(
    decodeImageInput("input_image", b64(png)),
    "PNG header declares 100000×100000 = 10,000,000,000 pixels",
  );
});

Deno.test("truncated PNG and JPEG pass the header check but fail to decode clearly", async () => {
  const pixels = new Uint8Array(64 * 64 * 3).map((_, i) => (i * 37) % 251);
  const png = await encode(pixels, 64, 64, 3, (s) => s.png({ compressionLevel: 0 }));
  const jpeg = await encode(pixels, 64, 64, 3, (s) => s.jpeg());
  for (const [bytes, name] of [[png, "PNG"], [jpeg, "JPEG"]] as const) {
    const cut = bytes.subarray(0, Math.floor(bytes.length * 0.6));
    const decoded = await decodeImageInput("input_image", b64(cut));
    strictEqual(decoded.width, 64);
    await rejectsImage(
      toRgbImage(decoded, 64, 64),
      `input_image: the ${name} image (64×64) could not be decoded`,
      "corrupt or truncated",
    );
    await rejectsImage(toMask({ ...decoded, field: "mask_image" }, 64, 64), "mask_image");
  }
});

Deno.test("8-bit RGB PNG decodes losslessly", async () => {
  const png = await encode(SMALL, 4, 2, 3, (s) => s.png());
  const image = await toRgbImage(await decodeImageInput("input_image", b64(png)), 4, 2);
  deepStrictEqual(Array.from(image.data), SMALL);
});

Deno.test("16-bit RGB PNG is converted to 8 bits (v16 / 257 within 1)", async () => {
  const values = Uint16Array.of(0x1234, 0x8000, 0xffff, 0x0101, 0x7f7f, 0xff00);
  const png = await encode(values, 2, 1, 3, (s) => s.toColourspace("rgb16").png());
  strictEqual(readPngHeader(png).bitDepth, 16);
  const image = await toRgbImage(await decodeImageInput("input_image", b64(png)), 2, 1);
  near([...px(image, 0, 0), ...px(image, 1, 0)], Array.from(values, (v) => v / 257), 1, "16-bit");
});

Deno.test("palette PNG is expanded to its RGB colours", async () => {
  const pixels = [10, 20, 30, 200, 0, 0, 0, 200, 0, 0, 0, 200];
  const png = await encode(pixels, 4, 1, 3, (s) => s.png({ palette: true, colours: 4 }));
  strictEqual(readPngHeader(png).colourType, 3);
  const image = await toRgbImage(await decodeImageInput("input_image", b64(png)), 4, 1);
  near(Array.from(image.data), pixels, 2, "palette");
});

Deno.test("grayscale PNG becomes R = G = B", async () => {
  const gray = [0, 100, 200, 255];
  const png = await encode(gray, 4, 1, 1, (s) => s.toColourspace("b-w").png());
  strictEqual(readPngHeader(png).colourType, 0);
  const image = await toRgbImage(await decodeImageInput("input_image", b64(png)), 4, 1);
  deepStrictEqual(Array.from(image.data), gray.flatMap((g) => [g, g, g]));
});

Deno.test("gray+alpha PNG is flattened onto white: v·a/255 + 255·(1 − a/255)", async () => {
  const pairs = [[0, 128], [100, 0], [200, 255], [40, 64]];
  const png = await encode(pairs.flat(), 4, 1, 2, (s) => s.toColourspace("b-w").png());
  strictEqual(readPngHeader(png).colourType, 4);
  const image = await toRgbImage(await decodeImageInput("input_image", b64(png)), 4, 1);
  const expected = pairs.flatMap(([v, a]) => {
    const out = (v * a) / 255 + 255 * (1 - a / 255);
    return [out, out, out];
  });
  near(Array.from(image.data), expected, 1, "gray+alpha");
});

Deno.test("RGBA PNG is flattened onto white with its alpha", async () => {
  const rgba = [[255, 0, 0, 255], [0, 0, 255, 128], [0, 0, 0, 0], [10, 200, 50, 51]];
  const png = await encode(rgba.flat(), 4, 1, 4, (s) => s.png());
  strictEqual(readPngHeader(png).colourType, 6);
  const image = await toRgbImage(await decodeImageInput("input_image", b64(png)), 4, 1);
  const expected = rgba.flatMap(([r, g, b, a]) =>
    [r, g, b].map((c) => (c * a) / 255 + 255 * (1 - a / 255))
  );
  near(Array.from(image.data), expected, 1, "rgba");
});

Deno.test("CMYK JPEG is converted to sRGB", async () => {
  // Left half reddish, right half bluish, both inside the CMYK gamut; the
  // round trip goes through ICC profiles, so colours are compared loosely,
  // but an inverted (Adobe) or channel-swapped decode would be far off.
  const pixels: number[] = [];
  for (let y = 0; y < 16; y++) {
    for (let x = 0; x < 32; x++) pixels.push(...(x < 16 ? [190, 60, 60] : [60, 100, 150]));
  }
  const jpeg = await encode(pixels, 32, 16, 3, (s) => s.toColourspace("cmyk").jpeg());
  strictEqual(readJpegHeader(jpeg).components, 4);
  const image = await toRgbImage(await decodeImageInput("input_image", b64(jpeg)), 32, 16);
  near(px(image, 4, 8), [190, 60, 60], 32, "red side");
  near(px(image, 28, 8), [60, 100, 150], 32, "blue side");
});

Deno.test("progressive JPEG decodes like the source", async () => {
  const pixels: number[] = [];
  for (let y = 0; y < 32; y++) {
    for (let x = 0; x < 32; x++) pixels.push(...(y < 16 ? [220, 180, 40] : [30, 90, 160]));
  }
  const jpeg = await encode(pixels, 32, 32, 3, (s) => s.jpeg({ progressive: true, quality: 95 }));
  strictEqual(readJpegHeader(jpeg).sofMarker, 0xc2);
  const image = await toRgbImage(await decodeImageInput("input_image", b64(jpeg)), 32, 32);
  near(px(image, 8, 4), [220, 180, 40], 8, "top");
  near(px(image, 8, 28), [30, 90, 160], 8, "bottom");
});

Deno.test("EXIF orientation 6 rotates 90° clockwise: dimensions swap, a corner moves", async () => {
  // Stored 32×16: red top-left 16×8 block, blue elsewhere.
  const W = 32, H = 16;
  const pixels: number[] = [];
  for (let y = 0; y < H; y++) {
    for (let x = 0; x < W; x++) pixels.push(...(x < 16 && y < 8 ? [255, 0, 0] : [0, 0, 255]));
  }
  const jpeg = await encode(
    pixels,
    W,
    H,
    3,
    (s) => s.jpeg({ quality: 95 }).withMetadata({ orientation: 6 }),
  );
  const decoded = await decodeImageInput("input_image", b64(jpeg));
  deepStrictEqual([decoded.width, decoded.height], [32, 16]); // header: stored size
  const native = await decodeRgb(decoded.bytes);
  deepStrictEqual([native.width, native.height], [16, 32]); // displayed size
  // Orientation 6: stored (x, y) is displayed at (H − 1 − y, x), so the red
  // block lands at displayed x in [8, 16), y in [0, 16): the top-right.
  const image = await toRgbImage(decoded, 16, 32);
  near(px(image, 12, 4), [255, 0, 0], 40, "displayed top-right");
  near(px(image, 3, 4), [0, 0, 255], 40, "displayed top-left");
  near(px(image, 12, 28), [0, 0, 255], 40, "displayed bottom-right");
});

Deno.test("toRgbImageClosest: the size closest to the displayed shape, EXIF orientation applied", async () => {
  const sizes = [{ width: 64, height: 64 }, { width: 64, height: 48 }, { width: 48, height: 64 }];
  // Stored 40×30 (landscape) with orientation 6: displayed 30×40, portrait.
  const pixels = Array.from({ length: 40 * 30 * 3 }, (_, i) => (i * 7) & 255);
  const jpeg = await encode(pixels, 40, 30, 3, (s) => s.jpeg().withMetadata({ orientation: 6 }));
  const rotated = await toRgbImageClosest(await decodeImageInput("input_image", b64(jpeg)), sizes);
  deepStrictEqual([rotated.width, rotated.height], [48, 64]);
  const png = await encode(pixels, 40, 30, 3, (s) => s.png());
  const plain = await toRgbImageClosest(await decodeImageInput("input_image", b64(png)), sizes);
  deepStrictEqual([plain.width, plain.height], [64, 48]);
  strictEqual(closestAspect(100, 100, sizes), 0);
  strictEqual(closestAspect(1000, 10, sizes), 1);
  strictEqual(closestAspect(Math.sqrt(4 / 3), 1, sizes), 0, "half way: the first");
});

Deno.test("images and masks are resized to every generation size", async () => {
  const png = await encode(SMALL, 4, 2, 3, (s) => s.png());
  const decoded = await decodeImageInput("input_image", b64(png));
  for (const [id, { width, height }] of Object.entries(SIZES)) {
    const image = await toRgbImage(decoded, width, height);
    deepStrictEqual([image.width, image.height, image.data.length], [
      width,
      height,
      width * height * 3,
    ], id);
    const mask = await toMask(decoded, width, height);
    deepStrictEqual([mask.width, mask.height, mask.data.length], [width, height, width * height]);
  }
});

Deno.test("images use Lanczos-3: a 64/192 checkerboard overshoots, unlike nearest/linear", async () => {
  const pixels: number[] = [];
  for (let y = 0; y < 8; y++) {
    for (let x = 0; x < 8; x++) pixels.push(...Array(3).fill((x + y) % 2 ? 192 : 64));
  }
  const png = await encode(pixels, 8, 8, 3, (s) => s.png());
  const image = await toRgbImage(await decodeImageInput("input_image", b64(png)), 512, 512);
  // Lanczos has negative lobes, so values leave the [64, 192] input range;
  // nearest and bilinear are convex combinations and cannot.
  const [min, max] = range(image.data);
  ok(min < 60 && max > 196, `lanczos range ${min}..${max}`);
  const source = { width: 8, height: 8, data: Uint8Array.from(pixels) };
  const nearest = await resizeRgb(source, 512, 512, "nearest");
  deepStrictEqual(new Set(nearest.data), new Set([64, 192]));
  const linear = await resizeRgb(source, 512, 512, "linear");
  const [linMin, linMax] = range(linear.data);
  ok(linMin >= 64 && linMax <= 192, `linear range ${linMin}..${linMax}`);
  const lanczos = await resizeRgb(source, 512, 512, "lanczos3");
  deepStrictEqual(lanczos.data, image.data);
});

Deno.test("masks use nearest-neighbour: the 0/1 edge of [200, 0] stays at the centre", async () => {
  // Nearest with pixel-centre mapping: source x = floor((x + 0.5) · 2 / 512),
  // so columns 0..255 take 200 (→ 1) and 256..511 take 0. Interpolation would
  // move the 127.5 crossing to about x = 221.
  const png = await encode([200, 0], 2, 1, 1, (s) => s.toColourspace("b-w").png());
  const mask = await toMask(await decodeImageInput("mask_image", b64(png)), 512, 4);
  const row = Array.from(mask.data.subarray(0, 512));
  deepStrictEqual(row, Array.from({ length: 512 }, (_, x) => (x < 256 ? 1 : 0)));
  ok(mask.data.every((v) => v === 0 || v === 1));
});

Deno.test("mask threshold: 127 keeps (0), 128 regenerates (1)", async () => {
  const png = await encode([0, 127, 128, 255], 4, 1, 1, (s) => s.toColourspace("b-w").png());
  const mask = await toMask(await decodeImageInput("mask_image", b64(png)), 4, 1);
  deepStrictEqual(Array.from(mask.data), [0, 0, 1, 1]);
});

Deno.test("mask uses luminance, and transparent mask pixels are kept", async () => {
  // Pure green and pure blue have the same channel mean (85) but relative
  // luminance (Rec. 709, on linear light, sRGB-encoded) of ~220 and ~76.
  const encodeY = (lin: number) =>
    255 * (lin <= 0.0031308 ? 12.92 * lin : 1.055 * lin ** (1 / 2.4) - 0.055);
  ok(encodeY(0.7152) > 127 && encodeY(0.0722) <= 127);
  const rgb = await encode([0, 255, 0, 0, 0, 255], 2, 1, 3, (s) => s.png());
  const mask = await toMask(await decodeImageInput("mask_image", b64(rgb)), 2, 1);
  deepStrictEqual(Array.from(mask.data), [1, 0]);
  // White at alpha 0 is flattened onto black (keep); white at alpha 255 regenerates.
  const ga = await encode([255, 0, 255, 255], 2, 1, 2, (s) => s.toColourspace("b-w").png());
  const maskA = await toMask(await decodeImageInput("mask_image", b64(ga)), 2, 1);
  deepStrictEqual(Array.from(maskA.data), [0, 1]);
});
