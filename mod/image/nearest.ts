/**
 * PIL's `Image.resize(size, Image.NEAREST)` for 8-bit images with one or
 * three interleaved channels, reproduced bit for bit.
 *
 * Pillow (`src/_imaging.c` `_resize` → `src/libImaging/Geometry.c`
 * `ImagingScaleAffine`) treats NEAREST as an affine scale: with
 * `a = in / out` per axis, output pixel `x` samples input
 * `trunc(xo)`, where `xo` starts at the centre of the first output pixel,
 * `a / 2`, and grows by `a` per pixel — accumulated in doubles, which is
 * not always the same as `(x + 0.5) · a`, so it is accumulated here too.
 * A sample that falls outside the input stays 0 (the C code clears the row
 * first). An unchanged size is a copy.
 *
 * @module
 */

import { checkResize } from "./lanczos.ts";
import type { RawPixels } from "./sharp.ts";

/**
 * Resizes `image` (1 or 3 interleaved 8-bit channels) to `width`×`height`
 * exactly as PIL's `Image.resize((width, height), Image.NEAREST)` does
 * (aspect ratio not kept). Returns new pixels; the input is not modified.
 * Throws `RangeError` for a malformed image, another channel count or a
 * non-positive target size.
 */
export function resizeNearest(image: RawPixels, width: number, height: number): RawPixels {
  checkResize("resizeNearest", image, width, height);
  const { channels, data } = image;
  const out = new Uint8Array(width * height * channels);
  if (image.width === width && image.height === height) {
    out.set(data);
    return { width, height, channels, data: out };
  }
  const ax = image.width / width;
  const ay = image.height / height;
  // Input sample offset per output column, -1 where it falls outside.
  const column = new Int32Array(width);
  let xo = ax * 0.5;
  for (let x = 0; x < width; x++) {
    const xin = xo < 0 ? -1 : Math.trunc(xo);
    column[x] = xin < image.width ? xin * channels : -1;
    xo += ax;
  }
  const inRow = image.width * channels;
  let yo = ay * 0.5;
  for (let y = 0; y < height; y++) {
    const yin = yo < 0 ? -1 : Math.trunc(yo);
    yo += ay;
    if (yin < 0 || yin >= image.height) continue;
    const rowStart = yin * inRow;
    let o = y * width * channels;
    if (channels === 1) {
      for (let x = 0; x < width; x++, o++) {
        const c = column[x];
        if (c >= 0) out[o] = data[rowStart + c];
      }
    } else {
      for (let x = 0; x < width; x++, o += 3) {
        const c = column[x];
        if (c < 0) continue;
        const p = rowStart + c;
        out[o] = data[p];
        out[o + 1] = data[p + 1];
        out[o + 2] = data[p + 2];
      }
    }
  }
  return { width, height, channels, data: out };
}
