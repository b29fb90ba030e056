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
 *   copy; an image more than 100 times as tall as wide that shrinks
 *   vertically takes the vertical pass first (Pillow ≥ 12.2).
 *
 * Speed: the coefficients depend only on the (input, output) length pair,
 * so they are computed once per pair and cached. The two passes are
 * WebAssembly with 128-bit SIMD (`lanczos.wat`, embedded by
 * `lanczos_wasm.ts`), the same 32-bit integer arithmetic as the C code
 * (every product and sum stays below 2³¹), so the result does not change;
 * the RGB horizontal pass, which does almost all the work when shrinking a
 * large photo, multiplies the three channels of a tap at once. The input
 * is copied into WebAssembly memory band by band, so each band is still in
 * cache when the pass reads it, and each resize gets its own memory, which
 * is garbage afterwards.
 *
 * @module
 */

import { LANCZOS_WASM_BASE64 } from "./lanczos_wasm.ts";
import type { RawPixels } from "./sharp.ts";

/** The fixed-point fraction bits of the weights (Resample.c `PRECISION_BITS`). */
const PRECISION_BITS = 22;
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
  /** `first`, `count` and `weights` in one array, as the kernels read them. */
  packed: Int32Array;
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
  return { first, count, weights, stride, packed: packTaps(first, count, weights) };
}

/** Tap tables packed for the kernels: `first`, `count`, then the weights. */
function packTaps(first: Int32Array, count: Int32Array, weights: Int32Array): Int32Array {
  const n = first.length;
  const packed = new Int32Array(2 * n + weights.length);
  packed.set(first, 0);
  packed.set(count, n);
  packed.set(weights, 2 * n);
  return packed;
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

/** Bytes of slack after every region: the kernels read and write up to 16 past the end. */
const SLACK = 16;
/**
 * Input rows are copied into WebAssembly memory in bands of about this many
 * bytes, small enough to stay in cache between the copy and the pass.
 */
export const BAND_BYTES = 1 << 18;

interface Kernels {
  horizontal3: Pass;
  horizontal1: Pass;
  vertical: Pass;
}
type Pass = (
  src: number,
  inWidthOrRowLength: number,
  rowsOrRow0: number,
  dst: number,
  outLength: number,
  first: number,
  count: number,
  weights: number,
  stride: number,
) => void;

let compiled: WebAssembly.Module | undefined;

/**
 * A fresh instance of the kernels over a fresh memory of `bytes`: the
 * memory is garbage once the resize returns, instead of a module-wide
 * memory that could only grow.
 */
function instantiate(bytes: number): { memory: WebAssembly.Memory; kernels: Kernels } {
  compiled ??= new WebAssembly.Module(Uint8Array.fromBase64(LANCZOS_WASM_BASE64));
  const memory = new WebAssembly.Memory({ initial: Math.ceil(bytes / 65536) });
  const instance = new WebAssembly.Instance(compiled, { env: { memory } });
  return { memory, kernels: instance.exports as unknown as Kernels };
}

/** Regions of one resize in WebAssembly memory, 16-byte aligned, each followed by slack. */
class Layout {
  size = 0;
  /** Reserves `bytes` and returns their offset. */
  take(bytes: number): number {
    const at = this.size;
    this.size = Math.ceil((at + bytes + SLACK) / 16) * 16;
    return at;
  }
}

/** A tap table placed in memory. */
interface PlacedTaps {
  taps: Taps;
  at: number;
}

function place(layout: Layout, t: Taps): PlacedTaps {
  return { taps: t, at: layout.take(t.packed.byteLength) };
}

/** Calls a pass with the tap table `p` (its `first`, `count` and weights offsets). */
function run(
  pass: Pass,
  p: PlacedTaps,
  src: number,
  a: number,
  b: number,
  dst: number,
  outLength: number,
): void {
  const n = p.taps.first.length;
  pass(src, a, b, dst, outLength, p.at, p.at + 4 * n, p.at + 8 * n, p.taps.stride);
}

/**
 * Resizes `image` (1 or 3 interleaved 8-bit channels) to `width`×`height`
 * exactly as PIL's `Image.resize((width, height), Image.LANCZOS)` does
 * (aspect ratio not kept). Returns new pixels; the input is not modified.
 * Throws `RangeError` for a malformed image, another channel count or a
 * non-positive target size.
 *
 * For an image more than 100 times as tall as wide that shrinks
 * vertically, the vertical pass runs first, as Pillow does since 12.2
 * (`Image.resize`, "Resize tall images vertically first"): that keeps the
 * intermediate image small (older Pillow would hold `width` × the whole
 * input height).
 */
export function resizeLanczos(image: RawPixels, width: number, height: number): RawPixels {
  checkResize("resizeLanczos", image, width, height);
  const { channels, data } = image;
  const inW = image.width, inH = image.height;
  if (inW === width && inH === height) {
    return { width, height, channels, data: new Uint8Array(data) };
  }
  const needH = inW !== width, needV = inH !== height;
  const hTaps = needH ? taps(inW, width) : undefined;
  const vTaps = needV ? taps(inH, height) : undefined;
  const horizontal = channels === 3 ? "horizontal3" : "horizontal1";
  const inRow = inW * channels, outRow = width * channels;
  const layout = new Layout();
  const h = hTaps && place(layout, hTaps);
  const v = vTaps && place(layout, vTaps);
  const outLength = outRow * height;
  let memory: WebAssembly.Memory, result: number;

  if (v && inH > inW * 100 && height < inH) {
    // Vertical first: input → (inW × height) → output.
    const input = layout.take(data.length);
    const mid = layout.take(inRow * height);
    const out = h ? layout.take(outLength) : mid;
    let kernels: Kernels;
    ({ memory, kernels } = instantiate(layout.size));
    writeTaps(memory, h, v);
    new Uint8Array(memory.buffer).set(data, input);
    run(kernels.vertical, v, input, inRow, 0, mid, height);
    if (h) run(kernels[horizontal], h, mid, inW, height, out, width);
    result = out;
  } else {
    // Horizontal first, over only the input rows the vertical pass reads.
    const row0 = v ? v.taps.first[0] : 0;
    const rowEnd = v ? v.taps.first[height - 1] + v.taps.count[height - 1] : inH;
    const rows = rowEnd - row0;
    const bandRows = h ? Math.max(1, Math.min(rows, Math.floor(BAND_BYTES / inRow))) : rows;
    const band = layout.take(bandRows * inRow);
    const mid = h ? layout.take(outRow * rows) : band;
    const out = v ? layout.take(outLength) : mid;
    let kernels: Kernels;
    ({ memory, kernels } = instantiate(layout.size));
    writeTaps(memory, h, v);
    const bytes = new Uint8Array(memory.buffer);
    if (h) {
      for (let r = 0; r < rows; r += bandRows) {
        const n = Math.min(bandRows, rows - r);
        const from = (row0 + r) * inRow;
        bytes.set(data.subarray(from, from + n * inRow), band);
        run(kernels[horizontal], h, band, inW, n, mid + r * outRow, width);
      }
    } else {
      bytes.set(data.subarray(row0 * inRow, rowEnd * inRow), band);
    }
    if (v) run(kernels.vertical, v, mid, outRow, row0, out, height);
    result = out;
  }
  // Copied out: a view would keep the whole memory alive and cannot be transferred.
  const pixels = new Uint8Array(memory.buffer, result, outLength).slice();
  return { width, height, channels, data: pixels };
}

function writeTaps(memory: WebAssembly.Memory, ...placed: (PlacedTaps | undefined)[]): void {
  const words = new Int32Array(memory.buffer);
  for (const p of placed) if (p) words.set(p.taps.packed, p.at / 4);
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
