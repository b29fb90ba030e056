/**
 * Benchmarks of the image input and output path at its limits:
 *
 * - a ~36-megapixel JPEG (6000×6000, photo-like content: gradients, texture
 *   and noise) sent as a data URI: `decodeImageInput` (data-URI split,
 *   canonical-base64 check, native base64 decode, magic bytes and header
 *   limits) and `toRgbImage` (libvips decode with JPEG shrink-on-load and a
 *   Lanczos-3 stretch to 512×512), alone and together;
 * - canonical-base64 validation (`checkBase64`) and validation + decode
 *   (`decodeBase64`) of a string at the 36,000,000-character limit;
 * - `encodePng` of a 512×512 RGB image with the five tEXt metadata chunks.
 *
 * The JPEG is made once with sharp (`sharpLib`, this folder's door to
 * sharp) and kept in `.cache/bench/image/` (git-ignored).
 *
 * Run: `deno bench -P=test mod/image/image_bench.ts`.
 *
 * @module
 */

import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { log } from "../log/mod.ts";
import { checkBase64, decodeBase64 } from "./base64.ts";
import { decodeImageInput, toRgbImage } from "./decode.ts";
import { MAX_BASE64_LENGTH } from "./limits.ts";
import { encodePng } from "./png.ts";
import { sharpLib } from "./sharp.ts";

const CACHE = fileURLToPath(new URL("../../.cache/bench/image/", import.meta.url));
const SIDE = 6000;
const TARGET = 512;

/** A photo-like 6000×6000 JPEG (quality 90), built once. */
async function bigJpeg(): Promise<Uint8Array> {
  const path = join(CACHE, `photo_${SIDE}x${SIDE}_q90.jpg`);
  try {
    return await Deno.readFile(path);
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  const raw = new Uint8Array(SIDE * SIDE * 3);
  let state = 12345;
  for (let y = 0; y < SIDE; y++) {
    for (let x = 0; x < SIDE; x++) {
      // xorshift noise on top of smooth gradients and a ripple texture.
      state ^= state << 13;
      state ^= state >>> 17;
      state ^= state << 5;
      const noise = (state & 31) - 16;
      const ripple = 40 * Math.sin(x * 0.05) * Math.cos(y * 0.031);
      const i = (y * SIDE + x) * 3;
      raw[i] = (x * 200) / SIDE + ripple + noise + 20;
      raw[i + 1] = (y * 200) / SIDE - ripple + noise + 20;
      raw[i + 2] = 128 + ripple + noise;
    }
  }
  const started = performance.now();
  const jpeg = await sharpLib(raw, { raw: { width: SIDE, height: SIDE, channels: 3 } })
    .jpeg({ quality: 90 })
    .toBuffer();
  const bytes = new Uint8Array(jpeg);
  await Deno.mkdir(CACHE, { recursive: true });
  await Deno.writeFile(path, bytes);
  log("info", "bench", "wrote the test JPEG", {
    path,
    bytes: bytes.length,
    encodeMs: Math.round(performance.now() - started),
  });
  return bytes;
}

const jpeg = await bigJpeg();
const dataUri = `data:image/jpeg;base64,${jpeg.toBase64()}`;
if (dataUri.length - "data:image/jpeg;base64,".length > MAX_BASE64_LENGTH) {
  throw new Error(`the test JPEG is too large for the base64 limit: ${jpeg.length} bytes`);
}
const decoded = await decodeImageInput("input_image", dataUri);
log("info", "bench", "36 MP input", {
  width: decoded.width,
  height: decoded.height,
  jpegBytes: jpeg.length,
  base64Chars: dataUri.length,
});

Deno.bench({
  name: "decodeImageInput (validate + base64 decode + sniff)",
  group: `${SIDE}×${SIDE} JPEG data URI`,
  n: 10,
  warmup: 2,
  async fn() {
    await decodeImageInput("input_image", dataUri);
  },
});

Deno.bench({
  name: `toRgbImage → ${TARGET}×${TARGET} (libvips decode + Lanczos-3)`,
  group: `${SIDE}×${SIDE} JPEG data URI`,
  n: 5,
  warmup: 1,
  async fn() {
    const rgb = await toRgbImage(decoded, TARGET, TARGET);
    if (rgb.data.length !== TARGET * TARGET * 3) throw new Error("unexpected image size");
  },
});

Deno.bench({
  name: "decodeImageInput + toRgbImage",
  group: `${SIDE}×${SIDE} JPEG data URI`,
  baseline: true,
  n: 5,
  warmup: 1,
  async fn() {
    await toRgbImage(await decodeImageInput("input_image", dataUri), TARGET, TARGET);
  },
});

// A valid base64 payload of exactly the limit (36,000,000 characters, a
// multiple of 4, so no padding): 27,000,000 bytes of varied content.
const limitBytes = new Uint8Array((MAX_BASE64_LENGTH / 4) * 3);
for (let i = 0; i < limitBytes.length; i++) limitBytes[i] = (i * 2654435761) >>> 24;
const limitBase64 = limitBytes.toBase64();
if (limitBase64.length !== MAX_BASE64_LENGTH) {
  throw new Error(`expected ${MAX_BASE64_LENGTH} characters, got ${limitBase64.length}`);
}

Deno.bench({
  name: "checkBase64 (canonical check only)",
  group: `base64 at the limit (${MAX_BASE64_LENGTH.toLocaleString("en")} characters)`,
  baseline: true,
  n: 10,
  warmup: 2,
  fn() {
    checkBase64("input_image", limitBase64);
  },
});

Deno.bench({
  name: "decodeBase64 (check + native decode)",
  group: `base64 at the limit (${MAX_BASE64_LENGTH.toLocaleString("en")} characters)`,
  n: 10,
  warmup: 2,
  fn() {
    decodeBase64("input_image", limitBase64);
  },
});

const picture = { width: TARGET, height: TARGET, data: new Uint8Array(TARGET * TARGET * 3) };
for (let i = 0; i < picture.data.length; i++) {
  picture.data[i] = (Math.sin(i * 0.001) * 100 + (i % 97)) & 255;
}
const metadata = {
  seed: "1234567890",
  size: "square_512",
  mode: "text_to_image",
  timestamp: "2026-01-01T00:00:00Z",
  elapsed_seconds: "12.34",
};

Deno.bench({
  name: `encodePng ${TARGET}×${TARGET} RGB + 5 tEXt chunks`,
  group: "PNG output",
  n: 20,
  warmup: 2,
  async fn() {
    await encodePng(picture, metadata);
  },
});
