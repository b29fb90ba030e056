/**
 * Previews within a byte budget: the highest quality that fits at full
 * size, a Lanczos reduction when none does, and a clear error when nothing
 * can fit. Checked by decoding what comes out with sharp (libvips).
 */

import assert from "node:assert/strict";
import { encodePng } from "./png.ts";
import { MIN_PREVIEW_SIDE, pngDimensions, PREVIEW_QUALITIES, previewWithin } from "./preview.ts";
import { encodeRawJpeg, sharpLib as sharp } from "./sharp.ts";
import { texturedImage } from "./testing.ts";

async function jpegInfo(bytes: Uint8Array) {
  const meta = await sharp(bytes).metadata();
  return { format: meta.format, width: meta.width, height: meta.height };
}

Deno.test("previewWithin: full size at the best quality of the ladder that fits", async () => {
  const image = texturedImage(512, 384, 60);
  const png = await encodePng(image, { seed: "1" });
  assert.deepEqual(pngDimensions(png), { width: 512, height: 384 });
  const raw = { ...image, channels: 3 };
  const sizes = await Promise.all(PREVIEW_QUALITIES.map((q) => encodeRawJpeg(raw, q)));
  // Strictly smaller as the quality drops, or the ladder would be pointless here.
  for (let i = 1; i < sizes.length; i++) assert.ok(sizes[i].length < sizes[i - 1].length);

  const best = await previewWithin(png, sizes[0].length);
  assert.deepEqual(best.bytes, sizes[0], "quality 90 fits its own size exactly");
  // One byte short of quality 90: quality 80, still at full size.
  const second = await previewWithin(png, sizes[0].length - 1);
  assert.deepEqual(second.bytes, sizes[1]);
  assert.equal(second.mimeType, "image/jpeg");
  assert.deepEqual([second.width, second.height], [512, 384]);
  assert.deepEqual(await jpegInfo(second.bytes), { format: "jpeg", width: 512, height: 384 });
});

Deno.test("previewWithin: reduced with the aspect ratio kept when no quality fits", async () => {
  // Pure noise: JPEG cannot compress it, so a 1024×768 one needs a smaller picture.
  const png = await encodePng(texturedImage(1024, 768, 255, 7), {});
  assert.ok(png.length > 2_000_000, `noise PNG of ${png.length} bytes`);
  for (const budget of [150_000, 40_000, 8_000]) {
    const preview = await previewWithin(png, budget);
    assert.ok(preview.bytes.length <= budget, `${preview.bytes.length} > ${budget}`);
    assert.ok(preview.width < 1024 && preview.height < 768, `${preview.width}x${preview.height}`);
    assert.ok(
      Math.abs(preview.width / preview.height - 4 / 3) < 0.02,
      `${preview.width}x${preview.height}`,
    );
    assert.ok(Math.min(preview.width, preview.height) >= MIN_PREVIEW_SIDE);
    assert.deepEqual(await jpegInfo(preview.bytes), {
      format: "jpeg",
      width: preview.width,
      height: preview.height,
    });
  }
});

Deno.test("previewWithin: a budget nothing fits is a RangeError naming it", async () => {
  const png = await encodePng(texturedImage(256, 256, 255, 3), {});
  await assert.rejects(
    previewWithin(png, 300),
    (e) =>
      e instanceof RangeError &&
      /256x256 image has no preview of at most 300 bytes/.test(e.message),
  );
});
