import { deepStrictEqual, strictEqual } from "node:assert";
import { readJpegHeader } from "./jpeg_header.ts";
import { describeUnknown, inspectImage, sniffFormat } from "./sniff.ts";
import { bitwiseCrc32, throwsImage } from "./testing.ts";

/** A PNG signature + IHDR (8-bit RGB) claiming `width`×`height`, with a valid CRC. */
function pngHeader(width: number, height: number, corruptCrc = false): Uint8Array {
  const out = new Uint8Array(33);
  const view = new DataView(out.buffer);
  out.set([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  view.setUint32(8, 13);
  out.set([0x49, 0x48, 0x44, 0x52], 12); // "IHDR"
  view.setUint32(16, width);
  view.setUint32(20, height);
  out.set([8, 2, 0, 0, 0], 24); // depth 8, colour type 2 (RGB), deflate, filter 0, no interlace
  view.setUint32(29, bitwiseCrc32(out.subarray(12, 29)) ^ (corruptCrc ? 1 : 0));
  return out;
}

/**
 * SOI, an APP0 segment, a COM segment whose payload contains a fake
 * "FF C0" (a scanner that ignores segment lengths would stop there), fill
 * bytes, then SOF0 with the given dimensions.
 */
function jpegHeader(width: number, height: number, sof = 0xc0): Uint8Array {
  return Uint8Array.of(
    0xff,
    0xd8,
    ...[0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00, 1, 1, 0, 0, 1, 0, 1, 0, 0],
    ...[0xff, 0xfe, 0x00, 0x0b, 0xff, 0xc0, 0x00, 0x11, 0x08, 0x00, 0x01, 0x00, 0x01],
    ...[0xff, 0xff, 0xff, sof, 0x00, 0x11, 0x08, height >> 8, height & 0xff, width >> 8],
    ...[width & 0xff, 3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1],
  );
}

function ascii(text: string): Uint8Array {
  return new TextEncoder().encode(text);
}

Deno.test("sniffFormat recognises PNG and JPEG magic bytes only", () => {
  strictEqual(sniffFormat(pngHeader(1, 1)), "png");
  strictEqual(sniffFormat(jpegHeader(1, 1)), "jpeg");
  strictEqual(sniffFormat(ascii("GIF89a")), null);
  strictEqual(sniffFormat(Uint8Array.of(0xff, 0xd8)), null);
});

Deno.test("a PNG IHDR claiming 100000×100000 is rejected by the header check", () => {
  throwsImage(
    () => inspectImage("input_image", pngHeader(100000, 100000), null),
    "input_image",
    "PNG header declares 100000×100000 = 10,000,000,000 pixels",
    "limit is 40,000,000 pixels",
  );
});

Deno.test("the pixel limit is inclusive: exactly 40,000,000 pixels pass the header check", () => {
  deepStrictEqual(inspectImage("input_image", pngHeader(8000, 5000), null), {
    format: "png",
    width: 8000,
    height: 5000,
  });
  throwsImage(() => inspectImage("input_image", pngHeader(8000, 5001), null), "40,008,000");
});

Deno.test("a PNG IHDR with a wrong CRC is rejected", () => {
  throwsImage(() => inspectImage("mask_image", pngHeader(10, 10, true), null), "IHDR CRC");
});

Deno.test("a PNG header cut short is reported as truncated", () => {
  throwsImage(
    () => inspectImage("input_image", pngHeader(10, 10).subarray(0, 20), null),
    "truncated PNG: 20 bytes",
  );
});

Deno.test("JPEG dimensions come from the first SOF after skipping segments by length", () => {
  const header = readJpegHeader(jpegHeader(640, 480));
  strictEqual(header.width, 640);
  strictEqual(header.height, 480);
  strictEqual(header.components, 3);
  strictEqual(readJpegHeader(jpegHeader(7, 9, 0xc2)).sofMarker, 0xc2);
});

Deno.test("a JPEG header over the pixel limit is rejected by the header check", () => {
  throwsImage(
    () => inspectImage("mask_image", jpegHeader(8000, 5001), null),
    "mask_image",
    "JPEG header declares 8000×5001 = 40,008,000 pixels",
  );
  strictEqual(inspectImage("mask_image", jpegHeader(8000, 5000), null).width, 8000);
});

Deno.test("JPEG headers that end early or scan before a frame are rejected", () => {
  const full = jpegHeader(10, 10);
  throwsImage(() => inspectImage("input_image", full.subarray(0, 25), null), "truncated JPEG");
  const sosFirst = Uint8Array.of(0xff, 0xd8, 0xff, 0xda, 0x00, 0x02, 0x00);
  throwsImage(() => inspectImage("input_image", sosFirst, null), "SOS", "before any frame");
  const zeroHeight = jpegHeader(10, 0);
  throwsImage(() => inspectImage("input_image", zeroHeight, null), "height 0");
});

Deno.test("DHT (C4), JPG (C8) and DAC (CC) are not taken for frame headers", () => {
  for (const marker of [0xc4, 0xc8, 0xcc]) {
    // The non-SOF segment precedes a real SOF0 of 3×2.
    const bytes = Uint8Array.of(
      0xff,
      0xd8,
      ...[0xff, marker, 0x00, 0x07, 0x08, 0x7f, 0x7f, 0x7f, 0x7f],
      ...[0xff, 0xc0, 0x00, 0x0b, 0x08, 0x00, 0x02, 0x00, 0x03, 1, 1, 0x11, 0],
    );
    const header = readJpegHeader(bytes);
    deepStrictEqual([header.width, header.height], [3, 2], `marker ${marker.toString(16)}`);
  }
});

Deno.test("a data URI whose declared type contradicts the bytes is rejected", () => {
  throwsImage(
    () => inspectImage("input_image", jpegHeader(4, 4), "png", "image/png"),
    "declares image/png but the bytes are JPEG",
  );
  throwsImage(
    () => inspectImage("input_image", pngHeader(4, 4), "jpeg", "image/jpg"),
    "declares image/jpg but the bytes are PNG",
  );
});

Deno.test("GIF, WebP, BMP and random bytes are unsupported, named when recognisable", () => {
  throwsImage(
    () => inspectImage("input_image", ascii("GIF89a\x01\x00\x01\x00"), null),
    "unsupported image format",
    "GIF",
    "only PNG and JPEG",
  );
  strictEqual(describeUnknown(ascii("RIFF\x10\x00\x00\x00WEBPVP8 ")), "WebP");
  strictEqual(describeUnknown(ascii("BM\x36\x00")), "BMP");
  // Deterministic pseudo-random bytes (LCG from Numerical Recipes).
  const random = new Uint8Array(256);
  let state = 12345;
  for (let i = 0; i < random.length; i++) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    random[i] = state >>> 24;
  }
  const hex = Array.from(random.subarray(0, 8), (b) => b.toString(16).padStart(2, "0")).join(" ");
  throwsImage(
    () => inspectImage("mask_image", random, null),
    "unsupported image format",
    `first bytes ${hex}`,
  );
});
