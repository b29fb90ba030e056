/**
 * PIL's `Image.resize(size, Image.LANCZOS)` for 8-bit images with one or
 * three interleaved channels (modes "L" and "RGB"), reproduced bit for bit.
 *
 * The algorithm is Pillow's `src/libImaging/Resample.c` (unchanged in its
 * arithmetic from 9.x to 12.x), re-derived here:
 * - per output index `xx` of an axis, the centre in input coordinates is
 *   `(xx + 0.5) · scale` with `scale = in / out`; the filter is widened by
 *   `filterscale = max(scale, 1)` (so shrinking averages, enlarging
 *   interpolates), its support is `3 · filterscale`, and the taps are the
 *   inputs `x` with `round(centre − support) ≤ x < round(centre + support)`
 *   clamped to the image, each weighted `lanczos((x − centre + 0.5) /
 *   filterscale)`, `lanczos(t) = sinc(t) · sinc(t / 3)` on `[−3, 3)`, then
 *   normalised to sum 1 in doubles;
 * - the weights are then quantised to 22 fractional bits
 *   (`PRECISION_BITS = 32 − 8 − 2`, leaving room for the negative lobes),
 *   rounding half away from zero;
 * - the horizontal pass runs first, over only the input rows the vertical
 *   pass will read, into an 8-bit intermediate; each sample is
 *   `(2²¹ + Σ pixel · weight) >> 22` clipped to 0..255 (round half up, and
 *   clipping after each pass — this is why libvips, vertical first, differs
 *   at sharp edges);
 * - a pass whose axis keeps its size is skipped, and an unchanged size is a
 *   copy.
 *
 * Coefficients depend only on the (input, output) length pair, so they are
 * computed once per pair and kept in a small cache; the passes use integer
 * arithmetic only (every product and sum stays below 2³¹, as in C).
 *
 * @module
 */

import type { RawPixels } from "./sharp.ts";

/** The fixed-point fraction bits of the weights (Resample.c `PRECISION_BITS`). */
const PRECISION_BITS = 22;
const HALF = 1 << (PRECISION_BITS - 1);
/** Lanczos a = 3: support of the unscaled filter. */
const SUPPORT = 3;

/** The taps of one axis: for output `i`, `count[i]` inputs from `first[i]`. */
interface Taps {
  /** First input index per output index. */
  first: Int32Array;
  /** Number of inputs per output index. */
  count: Int32Array;
  /** Quantised weights, `stride` per output index (unused slots 0). */
  weights: Int32Array;
  /** Weight slots per output index. */
  stride: number;
}

function sinc(x: number): number {
  if (x === 0) return 1;
  const t = x * Math.PI;
  return Math.sin(t) / t;
}

/** Resample.c `lanczos_filter`: truncated sinc windowed by sinc(x / 3). */
function lanczos(x: number): number {
  return -3 <= x && x < 3 ? sinc(x) * sinc(x / 3) : 0;
}

/** Resample.c `precompute_coeffs` + `normalize_coeffs_8bpc` for box `[0, inSize]`. */
function computeTaps(inSize: number, outSize: number): Taps {
  const scale = inSize / outSize;
  const filterscale = scale < 1 ? 1 : scale;
  const support = SUPPORT * filterscale;
  const stride = Math.ceil(support) * 2 + 1;
  const inv = 1 / filterscale;
  const first = new Int32Array(outSize);
  const count = new Int32Array(outSize);
  const weights = new Int32Array(outSize * stride);
  const k = new Float64Array(stride);
  for (let xx = 0; xx < outSize; xx++) {
    const center = (xx + 0.5) * scale;
    // C `(int)(v + 0.5)`: truncation toward zero, then clamped.
    let xmin = Math.trunc(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    let xmax = Math.trunc(center + support + 0.5);
    if (xmax > inSize) xmax = inSize;
    const n = xmax - xmin;
    let ww = 0;
    for (let x = 0; x < n; x++) {
      const w = lanczos((x + xmin - center + 0.5) * inv);
      k[x] = w;
      ww += w;
    }
    const base = xx * stride;
    for (let x = 0; x < n; x++) {
      const w = ww !== 0 ? k[x] / ww : k[x];
      const f = w * (1 << PRECISION_BITS);
      weights[base + x] = Math.trunc(w < 0 ? f - 0.5 : f + 0.5);
    }
    first[xx] = xmin;
    count[xx] = n;
  }
  return { first, count, weights, stride };
}

/** Recently used tap tables, keyed "in:out" (a handful of generation sizes). */
const cache = new Map<string, Taps>();
const CACHE_SIZE = 16;

/** The taps for `inSize → outSize`, computed once per pair. */
function taps(inSize: number, outSize: number): Taps {
  const key = `${inSize}:${outSize}`;
  let t = cache.get(key);
  if (t) {
    cache.delete(key); // re-insert: most recently used last
  } else {
    t = computeTaps(inSize, outSize);
    if (cache.size >= CACHE_SIZE) cache.delete(cache.keys().next().value!);
  }
  cache.set(key, t);
  return t;
}

/**
 * Horizontal pass over input rows `row0 .. row0 + rows`: `src` is
 * `inWidth` pixels of `channels` per row, the result `outWidth` per row.
 */
function horizontal(
  src: Uint8Array,
  inWidth: number,
  row0: number,
  rows: number,
  channels: number,
  t: Taps,
): Uint8ClampedArray {
  const outWidth = t.first.length;
  const out = new Uint8ClampedArray(outWidth * rows * channels);
  const { first, count, weights, stride } = t;
  const inRow = inWidth * channels;
  if (channels === 3) {
    let o = 0;
    for (let y = 0; y < rows; y++) {
      const rowStart = (row0 + y) * inRow;
      for (let xx = 0; xx < outWidth; xx++) {
        let p = rowStart + first[xx] * 3;
        let w = xx * stride;
        const end = w + count[xx];
        let s0 = HALF, s1 = HALF, s2 = HALF;
        for (; w < end; w++, p += 3) {
          const k = weights[w];
          s0 += src[p] * k;
          s1 += src[p + 1] * k;
          s2 += src[p + 2] * k;
        }
        // A clamped store of the shifted sum is Resample.c `clip8`.
        out[o] = s0 >> PRECISION_BITS;
        out[o + 1] = s1 >> PRECISION_BITS;
        out[o + 2] = s2 >> PRECISION_BITS;
        o += 3;
      }
    }
  } else {
    let o = 0;
    for (let y = 0; y < rows; y++) {
      const rowStart = (row0 + y) * inRow;
      for (let xx = 0; xx < outWidth; xx++) {
        let p = rowStart + first[xx];
        let w = xx * stride;
        const end = w + count[xx];
        let s = HALF;
        for (; w < end; w++, p++) s += src[p] * weights[w];
        out[o++] = s >> PRECISION_BITS;
      }
    }
  }
  return out;
}

/**
 * Vertical pass: `src` holds rows of `rowLength` samples starting at input
 * row `row0`; output row `yy` combines rows `first[yy] − row0 …`.
 */
function vertical(
  src: Uint8Array | Uint8ClampedArray,
  rowLength: number,
  row0: number,
  t: Taps,
): Uint8ClampedArray {
  const outHeight = t.first.length;
  const out = new Uint8ClampedArray(rowLength * outHeight);
  const acc = new Int32Array(rowLength);
  const { first, count, weights, stride } = t;
  for (let yy = 0; yy < outHeight; yy++) {
    acc.fill(HALF);
    const w0 = yy * stride;
    const n = count[yy];
    let p = (first[yy] - row0) * rowLength;
    for (let i = 0; i < n; i++, p += rowLength) {
      const k = weights[w0 + i];
      for (let x = 0; x < rowLength; x++) acc[x] += src[p + x] * k;
    }
    const o = yy * rowLength;
    for (let x = 0; x < rowLength; x++) out[o + x] = acc[x] >> PRECISION_BITS;
  }
  return out;
}

function asBytes(a: Uint8ClampedArray): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.length);
}

/**
 * Resizes `image` (1 or 3 interleaved 8-bit channels) to `width`×`height`
 * exactly as PIL's `Image.resize((width, height), Image.LANCZOS)` does
 * (aspect ratio not kept). Returns new pixels; the input is not modified.
 * Throws `RangeError` for a malformed image, another channel count or a
 * non-positive target size.
 */
export function resizeLanczos(image: RawPixels, width: number, height: number): RawPixels {
  checkResize("resizeLanczos", image, width, height);
  const { channels, data } = image;
  if (image.width === width && image.height === height) {
    return { width, height, channels, data: new Uint8Array(data) };
  }
  const vert = image.height !== height ? taps(image.height, height) : undefined;
  // Only the input rows the vertical pass reads go through the horizontal pass.
  const row0 = vert ? vert.first[0] : 0;
  const rowEnd = vert ? vert.first[height - 1] + vert.count[height - 1] : image.height;
  let rows: Uint8Array | Uint8ClampedArray = data;
  let rowsStart = 0;
  if (image.width !== width) {
    rows = horizontal(data, image.width, row0, rowEnd - row0, channels, taps(image.width, width));
    rowsStart = row0;
  }
  const out = vert ? vertical(rows, width * channels, rowsStart, vert) : rows;
  return { width, height, channels, data: out instanceof Uint8ClampedArray ? asBytes(out) : out };
}

/** Shared argument checks of the PIL resamplers. */
export function checkResize(name: string, image: RawPixels, width: number, height: number): void {
  const { channels } = image;
  if (channels !== 1 && channels !== 3) {
    throw new RangeError(`${name}: only 1 or 3 channels are supported, got ${channels}`);
  }
  if (
    !Number.isInteger(image.width) || !Number.isInteger(image.height) || image.width < 1 ||
    image.height < 1 || image.data.length !== image.width * image.height * channels
  ) {
    throw new RangeError(
      `${name}: image is ${image.width}×${image.height}×${channels} but has ${image.data.length} bytes, expected ${
        image.width * image.height * channels
      }`,
    );
  }
  if (!Number.isInteger(width) || !Number.isInteger(height) || width < 1 || height < 1) {
    throw new RangeError(`${name}: target size must be positive integers, got ${width}×${height}`);
  }
}
