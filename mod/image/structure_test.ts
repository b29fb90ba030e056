import assert from "node:assert/strict";
import { deflateSync } from "node:zlib";
import { ToolError } from "../mcp/tool.ts";
import { decodeImageInput, toRgbImage } from "./decode.ts";
import { pngChunk as chunk } from "./png.ts";
import { sharpLib as sharp } from "./sharp.ts";
import { countJpegScans, MAX_JPEG_SCANS, prunePngChunks } from "./structure.ts";

const pixels = new Uint8Array(64 * 64 * 3).map((_, i) => (i * 37) % 251);
const raw = { raw: { width: 64, height: 64, channels: 3 as const } };

async function pngBytes(): Promise<Uint8Array> {
  return new Uint8Array(await sharp(pixels, raw).png().toBuffer());
}

async function jpegBytes(progressive: boolean): Promise<Uint8Array> {
  return new Uint8Array(await sharp(pixels, raw).jpeg({ progressive, quality: 90 }).toBuffer());
}

function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
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
  const many = concat(jpeg.subarray(0, eoi), ...Array(150).fill(scan), jpeg.subarray(eoi));
  assert.equal(countJpegScans(many), MAX_JPEG_SCANS + 1, "the count stops past the limit");
  await rejectsImage(
    decodeImageInput("input_image", many.toBase64()),
    /^input_image: the JPEG has more than 100 scans/,
  );
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
    concat(new TextEncoder().encode("k\0\0"), deflateSync(new Uint8Array(100_000))),
  );
  const t = chunk("tEXt", new TextEncoder().encode("Comment\0hello"));
  const withText = concat(png.subarray(0, 33), ...Array(200).fill(z), t, png.subarray(33));
  const pruned = prunePngChunks(withText);
  assert.equal(pruned.textChunks, 201);
  assert.deepEqual(pruned.bytes, png);
  const decoded = await decodeImageInput("input_image", withText.toBase64());
  assert.deepEqual(decoded.bytes, png);
  assert.deepEqual((await toRgbImage(decoded, 64, 64)).data, pixels);
});

Deno.test("a PNG with more than 1 MB of other ancillary chunks is refused", async () => {
  const png = await pngBytes();
  const small = concat(
    png.subarray(0, 33),
    chunk("prVt", new Uint8Array(900_000)),
    png.subarray(33),
  );
  assert.equal((await decodeImageInput("input_image", small.toBase64())).width, 64);
  const big = concat(
    png.subarray(0, 33),
    chunk("prVt", new Uint8Array(600_000)),
    chunk("prVt", new Uint8Array(600_000)),
    png.subarray(33),
  );
  // Two chunks of 600,000 bytes plus 12 bytes of framing each, plus what sharp wrote (pHYs).
  const base = prunePngChunks(png).ancillaryBytes;
  assert.equal(prunePngChunks(big).ancillaryBytes, base + 1_200_024);
  await rejectsImage(
    decodeImageInput("mask_image", big.toBase64()),
    /^mask_image: the PNG carries 1,200,\d{3} bytes of metadata chunks .* limit is 1,000,000/,
  );
});
