import assert from "node:assert/strict";
import { deflateSync } from "node:zlib";
import { ToolError } from "../mcp/tool.ts";
import { decodeImageInput, toRgbImage } from "./decode.ts";
import { concatBytes } from "../bytes/mod.ts";
import { pngChunk as chunk } from "./png.ts";
import { sharpLib as sharp } from "./sharp.ts";
import { paddedScanFlood, scanFloodJpeg } from "../../tests/fixtures/jpeg_fixtures.ts";
import { CorruptJpeg, countJpegScans, MAX_JPEG_SCANS, prunePngChunks } from "./structure.ts";

const pixels = new Uint8Array(64 * 64 * 3).map((_, i) => (i * 37) % 251);
const raw = { raw: { width: 64, height: 64, channels: 3 as const } };

async function pngBytes(): Promise<Uint8Array> {
  return new Uint8Array(await sharp(pixels, raw).png().toBuffer());
}

async function jpegBytes(progressive: boolean): Promise<Uint8Array> {
  return new Uint8Array(await sharp(pixels, raw).jpeg({ progressive, quality: 90 }).toBuffer());
}

async function rejectsImage(promise: Promise<unknown>, pattern: RegExp): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof ToolError, String(error));
    assert.equal(error.category, "image");
    assert.match(error.message, pattern);
    return true;
  });
}

Deno.test("an ordinary progressive JPEG is well under the scan limit and decodes", async () => {
  const jpeg = await jpegBytes(true);
  const scans = countJpegScans(jpeg);
  assert.ok(scans >= 2 && scans <= 20, `scans: ${scans}`);
  assert.equal(countJpegScans(await jpegBytes(false)), 1);
  const decoded = await decodeImageInput("input_image", jpeg.toBase64());
  assert.equal((await toRgbImage(decoded, 64, 64)).width, 64);
});

Deno.test("a JPEG with more than 100 scans is refused before decoding", async () => {
  const jpeg = await jpegBytes(true);
  // Repeat the last scan (from its SOS to the EOI) 150 times.
  const lastSos = jpeg.findLastIndex((b, i) => b === 0xff && jpeg[i + 1] === 0xda);
  const eoi = jpeg.length - 2;
  const scan = jpeg.subarray(lastSos, eoi);
  const many = concatBytes([jpeg.subarray(0, eoi), ...Array(150).fill(scan), jpeg.subarray(eoi)]);
  assert.equal(countJpegScans(many), MAX_JPEG_SCANS + 1, "the count stops past the limit");
  await rejectsImage(
    decodeImageInput("input_image", many.toBase64()),
    /^input_image: the JPEG has more than 100 scans/,
  );
});

Deno.test("one 0x00 before the first SOS of a progressive JPEG with 8,000 scans (19.8 MB): refused as corrupt before decoding", async () => {
  // libjpeg skips the byte with a warning and decodes every scan, while a walk that stopped at
  // it counted 0 scans.
  const { padded, unpadded, padAt } = await paddedScanFlood();
  assert.ok(padded.length > 19_000_000, `${padded.length} bytes`);
  assert.throws(
    () => countJpegScans(padded),
    (error: unknown) =>
      error instanceof CorruptJpeg &&
      error.message === `byte 0x00 at offset ${padAt} where a marker must start`,
  );
  await rejectsImage(
    decodeImageInput("input_image", padded.toBase64()),
    new RegExp(
      `^input_image: the JPEG is corrupt: byte 0x00 at offset ${padAt} where a marker must ` +
        `start; re-saving it`,
    ),
  );
  // Without the padding byte the same file is counted, and refused for its scans.
  assert.equal(countJpegScans(unpadded), MAX_JPEG_SCANS + 1);
  await rejectsImage(
    decodeImageInput("input_image", unpadded.toBase64()),
    /^input_image: the JPEG has more than 100 scans/,
  );
});

Deno.test("fill bytes before markers and in scan data hide no scan; stray RST markers are followed", async () => {
  const filled = scanFloodJpeg({ size: 64, acScans: 150, fillBeforeEachScan: 3 });
  assert.equal(countJpegScans(filled), MAX_JPEG_SCANS + 1);
  const few = scanFloodJpeg({ size: 64, acScans: 4, fillBeforeEachScan: 2 });
  assert.equal(countJpegScans(few), 5);
  // The fixture is a JPEG libjpeg decodes: all-zero coefficients are mid-grey.
  const decoded = await decodeImageInput("input_image", few.toBase64());
  const rgb = await toRgbImage(decoded, 8, 8);
  assert.ok(rgb.data.every((v) => v === 128), `pixels ${rgb.data.slice(0, 6)}`);
  // Scan data holding stuffed FF 00, FF FF fill runs and RST markers, then a stray RST
  // and a TEM between segments: one scan, then the SOS behind them is still found.
  const soi = [0xff, 0xd8];
  const sos = [0xff, 0xda, 0x00, 0x08, 0x01, 0x01, 0x00, 0x01, 0x3f, 0x00];
  const data = [0x12, 0xff, 0x00, 0x34, 0xff, 0xff, 0xff, 0x00, 0xff, 0xd3, 0x56];
  const bytes = new Uint8Array([
    ...soi,
    ...sos,
    ...data,
    0xff,
    0xd0,
    0xff,
    0x01,
    ...sos,
    ...data,
    0xff,
    0xff,
    0xd9,
  ]);
  assert.equal(countJpegScans(bytes), 2);
});

Deno.test("a marker walk that cannot be followed is a corrupt JPEG", () => {
  const soi = [0xff, 0xd8];
  const com = [0xff, 0xfe, 0x00, 0x04, 0x41, 0x42];
  const cases: Array<[string, number[], RegExp]> = [
    ["garbage between segments", [...soi, ...com, 0x07, ...com], /^byte 0x07 at offset 8 where/],
    [
      "FF 00 where a marker must be",
      [...soi, ...com, 0xff, 0x00, ...com],
      /^marker FF 00 at offset 8/,
    ],
    [
      "a reserved marker",
      [...soi, 0xff, 0x05, 0x00, 0x40, ...com],
      /^marker FF 05 at offset 2 is not/,
    ],
    ["a reserved marker in scan data", [
      ...soi,
      0xff,
      0xda,
      0x00,
      0x08,
      0x01,
      0x01,
      0x00,
      0x01,
      0x3f,
      0x00,
      0x11,
      0xff,
      0x05,
      0x00,
      0x40,
    ], /^marker FF 05 at offset 13 is not/],
    ["a second SOI", [...soi, ...com, ...soi], /^marker FF D8 at offset 8 is not/],
    [
      "a segment length below 2",
      [...soi, 0xff, 0xfe, 0x00, 0x01],
      /^the segment at offset 2 has length 1$/,
    ],
  ];
  for (const [what, bytes, message] of cases) {
    assert.throws(
      () => countJpegScans(new Uint8Array(bytes)),
      (error: unknown) => error instanceof CorruptJpeg && message.test(error.message),
      what,
    );
  }
  // A file that ends early is counted up to its end; the decoder reports the truncation.
  const truncated = scanFloodJpeg({ size: 64, acScans: 3 });
  assert.equal(countJpegScans(truncated.subarray(0, truncated.length - 20)), 3);
});

Deno.test("a JPEG whose frame header disagrees with its scan data is refused, not greyed", async () => {
  const jpeg = await jpegBytes(false);
  const sof = jpeg.findIndex((b, i) => b === 0xff && jpeg[i + 1] === 0xc0);
  const lying = jpeg.slice();
  lying[sof + 5] = 0; // height 64 → 128: half the frame has no scan data (libjpeg only warns)
  lying[sof + 6] = 128;
  const decoded = await decodeImageInput("input_image", lying.toBase64());
  assert.equal(decoded.height, 128);
  await rejectsImage(toRgbImage(decoded, 64, 64), /could not be decoded.*re-saving it/);
});

Deno.test("PNG text chunks are dropped before decoding; the pixels are the same", async () => {
  const png = await pngBytes();
  const z = chunk(
    "zTXt",
    concatBytes([new TextEncoder().encode("k\0\0"), deflateSync(new Uint8Array(100_000))]),
  );
  const t = chunk("tEXt", new TextEncoder().encode("Comment\0hello"));
  const withText = concatBytes([png.subarray(0, 33), ...Array(200).fill(z), t, png.subarray(33)]);
  const pruned = prunePngChunks(withText);
  assert.equal(pruned.textChunks, 201);
  assert.deepEqual(pruned.bytes, png);
  const decoded = await decodeImageInput("input_image", withText.toBase64());
  assert.deepEqual(decoded.bytes, png);
  assert.deepEqual((await toRgbImage(decoded, 64, 64)).data, pixels);
});

Deno.test("a PNG with more than 1 MB of other ancillary chunks is refused", async () => {
  const png = await pngBytes();
  const small = concatBytes([
    png.subarray(0, 33),
    chunk("prVt", new Uint8Array(900_000)),
    png.subarray(33),
  ]);
  assert.equal((await decodeImageInput("input_image", small.toBase64())).width, 64);
  const big = concatBytes([
    png.subarray(0, 33),
    chunk("prVt", new Uint8Array(600_000)),
    chunk("prVt", new Uint8Array(600_000)),
    png.subarray(33),
  ]);
  // Two chunks of 600,000 bytes plus 12 bytes of framing each, plus what sharp wrote (pHYs).
  const base = prunePngChunks(png).ancillaryBytes;
  assert.equal(prunePngChunks(big).ancillaryBytes, base + 1_200_024);
  await rejectsImage(
    decodeImageInput("mask_image", big.toBase64()),
    /^mask_image: the PNG carries 1,200,\d{3} bytes of metadata chunks .* limit is 1,000,000/,
  );
});
