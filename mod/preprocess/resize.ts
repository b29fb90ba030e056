/**
 * `cv2.resize` kernels for 8-bit RGB images, ported from opencv
 * `modules/imgproc/src/resize.cpp` (4.x), plus controlnet_aux's
 * `resize_image` (short side to a resolution, both sides rounded to
 * multiples of 64).
 *
 * - {@link resizeLinear}: `INTER_LINEAR` — coefficients quantised to 1/2048
 *   (`INTER_RESIZE_COEF_BITS = 11`), horizontal pass in integers, vertical
 *   pass as OpenCV's SIMD `VResizeLinearVec_32s8u` computes it (the scalar
 *   `FixedPtCast` rounds differently by up to 1, and x86 builds never use
 *   it for 3-channel rows); an exact 2× shrink is the 2×2 box average OpenCV
 *   switches to.
 * - {@link resizeArea}: `INTER_AREA` for shrinking, with OpenCV's float
 *   pixel-area weights and its float accumulation order.
 * - {@link resizeLanczos4}: `INTER_LANCZOS4` with OpenCV's coefficient
 *   formula and 11-bit fixed point (OpenCV has only a scalar path for it).
 *
 * Checked against OpenCV 4.6 (Debian, x86-64) with the fixtures in
 * `testdata/` (made by `testdata/make_golden.py`): all three kernels are
 * bit-exact there. Other OpenCV builds may take other SIMD paths.
 *
 * @module
 */

import type { RgbImage } from "../pipeline/types.ts";
import { clampU8, cvRound, saturateU8, shr } from "./fixed_point.ts";

const COEF_BITS = 11;
const COEF_SCALE = 1 << COEF_BITS;

function checkSize(src: RgbImage, dw: number, dh: number): void {
  if (src.data.length !== src.width * src.height * 3 || src.width < 1 || src.height < 1) {
    throw new RangeError(
      `resize: source must be a non-empty RGB image, got ${src.width}x${src.height} with ${src.data.length} bytes`,
    );
  }
  if (!Number.isInteger(dw) || !Number.isInteger(dh) || dw < 1 || dh < 1) {
    throw new RangeError(`resize: target size must be positive integers, got ${dw}x${dh}`);
  }
}

function copyImage(src: RgbImage): RgbImage {
  return { width: src.width, height: src.height, data: new Uint8Array(src.data) };
}

/** Per destination index: source index and its two 11-bit weights (as `resizeGeneric_`). */
function linearTaps(srcLen: number, dstLen: number): { ofs: Int32Array; w: Int16Array } {
  const scale = 1 / (dstLen / srcLen);
  const ofs = new Int32Array(dstLen);
  const w = new Int16Array(dstLen * 2);
  for (let d = 0; d < dstLen; d++) {
    let f = Math.fround((d + 0.5) * scale - 0.5);
    let s = Math.floor(f);
    f = Math.fround(f - s);
    if (s < 0) {
      f = 0;
      s = 0;
    }
    if (s >= srcLen - 1) {
      f = 0;
      s = srcLen - 1;
    }
    ofs[d] = s;
    w[d * 2] = cvRound(Math.fround(Math.fround(1 - f) * COEF_SCALE));
    w[d * 2 + 1] = cvRound(Math.fround(f * COEF_SCALE));
  }
  return { ofs, w };
}

/**
 * `cv2.resize(src, (dw, dh), interpolation=cv2.INTER_LINEAR)` on an RGB
 * `uint8` image (half-pixel centres, replicated borders).
 */
export function resizeLinear(src: RgbImage, dw: number, dh: number): RgbImage {
  checkSize(src, dw, dh);
  const sw = src.width;
  const sh = src.height;
  if (sw === dw && sh === dh) return copyImage(src);
  // resize.cpp: INTER_LINEAR with an exact integer factor of 2 becomes INTER_AREA (fast).
  if (dw * 2 === sw && dh * 2 === sh) return halve(src);

  const xt = linearTaps(sw, dw);
  const rowW = dw * 3;
  const rows = new Map<number, Int32Array>();
  const hrow = (sy: number): Int32Array => {
    let row = rows.get(sy);
    if (row) return row;
    row = new Int32Array(rowW);
    const base = sy * sw * 3;
    for (let dx = 0; dx < dw; dx++) {
      const sx = xt.ofs[dx];
      const a0 = xt.w[dx * 2];
      const a1 = xt.w[dx * 2 + 1];
      const p = base + sx * 3;
      const q = sx + 1 < sw ? p + 3 : p; // a1 is 0 whenever sx is the last column
      for (let k = 0; k < 3; k++) row[dx * 3 + k] = src.data[p + k] * a0 + src.data[q + k] * a1;
    }
    rows.set(sy, row);
    return row;
  };

  const out = new Uint8Array(dw * dh * 3);
  for (let dy = 0; dy < dh; dy++) {
    // Vertical taps are not clamped in the tables; the rows they name are (border replicate).
    const f = Math.fround((dy + 0.5) * (1 / (dh / sh)) - 0.5);
    const sy = Math.floor(f);
    const s0 = hrow(Math.min(Math.max(sy, 0), sh - 1));
    const s1 = hrow(Math.min(Math.max(sy + 1, 0), sh - 1));
    const fy = Math.fround(f - sy);
    const b0 = cvRound(Math.fround(Math.fround(1 - fy) * COEF_SCALE));
    const b1 = cvRound(Math.fround(fy * COEF_SCALE));
    const o = dy * rowW;
    for (let x = 0; x < rowW; x++) {
      // VResizeLinearVec_32s8u: ((S>>4)*b)>>16 per row, summed, then rounding >>2.
      const v = shr(shr(s0[x], 4) * b0, 16) + shr(shr(s1[x], 4) * b1, 16);
      out[o + x] = clampU8(shr(v + 2, 2));
    }
  }
  return { width: dw, height: dh, data: out };
}

/** Exact 2× shrink: the rounded mean of each 2×2 block (`resizeAreaFast_`, SIMD rounding). */
function halve(src: RgbImage): RgbImage {
  const dw = src.width / 2;
  const dh = src.height / 2;
  const out = new Uint8Array(dw * dh * 3);
  const sStride = src.width * 3;
  for (let y = 0; y < dh; y++) {
    for (let x = 0; x < dw; x++) {
      const p = y * 2 * sStride + x * 6;
      for (let k = 0; k < 3; k++) {
        const sum = src.data[p + k] + src.data[p + 3 + k] + src.data[p + sStride + k] +
          src.data[p + sStride + 3 + k];
        out[(y * dw + x) * 3 + k] = (sum + 2) >> 2;
      }
    }
  }
  return { width: dw, height: dh, data: out };
}

/** `computeResizeAreaTab` (resize.cpp): per destination cell, the covering source cells and float weights. */
function areaTaps(srcLen: number, dstLen: number): Array<Array<[number, number]>> {
  const scale = 1 / (dstLen / srcLen);
  const taps: Array<Array<[number, number]>> = [];
  for (let d = 0; d < dstLen; d++) {
    const fsx1 = d * scale;
    const fsx2 = fsx1 + scale;
    const cellWidth = Math.min(scale, srcLen - fsx1);
    let sx1 = Math.ceil(fsx1);
    let sx2 = Math.floor(fsx2);
    sx2 = Math.min(sx2, srcLen - 1);
    sx1 = Math.min(sx1, sx2);
    const list: Array<[number, number]> = [];
    if (sx1 - fsx1 > 1e-3) list.push([sx1 - 1, Math.fround((sx1 - fsx1) / cellWidth)]);
    for (let s = sx1; s < sx2; s++) list.push([s, Math.fround(1 / cellWidth)]);
    if (fsx2 - sx2 > 1e-3) {
      list.push([sx2, Math.fround(Math.min(Math.min(fsx2 - sx2, 1), cellWidth) / cellWidth)]);
    }
    taps.push(list);
  }
  return taps;
}

/**
 * `cv2.resize(..., interpolation=cv2.INTER_AREA)` for shrinking (no side
 * larger than the source): an exact 2× factor is the rounded 2×2 mean, other
 * integer factors the block mean (`resizeAreaFast_`), anything else the
 * area-weighted mean with OpenCV's float weights and float accumulation
 * order (`ResizeArea_Invoker`).
 */
export function resizeArea(src: RgbImage, dw: number, dh: number): RgbImage {
  checkSize(src, dw, dh);
  const sw = src.width;
  const sh = src.height;
  if (dw > sw || dh > sh) {
    throw new RangeError(`resizeArea only shrinks: ${sw}x${sh} -> ${dw}x${dh} enlarges a side`);
  }
  if (dw === sw && dh === sh) return copyImage(src);
  const scaleX = 1 / (dw / sw);
  const scaleY = 1 / (dh / sh);
  const ix = cvRound(scaleX);
  const iy = cvRound(scaleY);
  if (Math.abs(scaleX - ix) < Number.EPSILON && Math.abs(scaleY - iy) < Number.EPSILON) {
    if (ix === 2 && iy === 2) return halve(src);
    return blockMean(src, dw, dh, ix, iy);
  }
  const xt = areaTaps(sw, dw);
  const yt = areaTaps(sh, dh);
  const out = new Uint8Array(dw * dh * 3);
  const buf = new Float32Array(dw * 3);
  const sum = new Float32Array(dw * 3);
  for (let dy = 0; dy < dh; dy++) {
    sum.fill(0);
    for (const [sy, beta] of yt[dy]) {
      buf.fill(0);
      const base = sy * sw * 3;
      for (let dx = 0; dx < dw; dx++) {
        for (const [sx, alpha] of xt[dx]) {
          for (let k = 0; k < 3; k++) {
            buf[dx * 3 + k] = buf[dx * 3 + k] + Math.fround(src.data[base + sx * 3 + k] * alpha);
          }
        }
      }
      for (let i = 0; i < buf.length; i++) sum[i] = sum[i] + Math.fround(beta * buf[i]);
    }
    for (let i = 0; i < sum.length; i++) out[dy * dw * 3 + i] = saturateU8(sum[i]);
  }
  return { width: dw, height: dh, data: out };
}

/** `resizeAreaFast_` for integer factors other than 2: block sum times float `1/area`, rounded. */
function blockMean(src: RgbImage, dw: number, dh: number, fx: number, fy: number): RgbImage {
  const out = new Uint8Array(dw * dh * 3);
  const scale = Math.fround(1 / (fx * fy));
  for (let y = 0; y < dh; y++) {
    for (let x = 0; x < dw; x++) {
      for (let k = 0; k < 3; k++) {
        let s = 0;
        for (let j = 0; j < fy; j++) {
          for (let i = 0; i < fx; i++) {
            s += src.data[((y * fy + j) * src.width + x * fx + i) * 3 + k];
          }
        }
        out[(y * dw + x) * 3 + k] = saturateU8(Math.fround(s * scale));
      }
    }
  }
  return { width: dw, height: dh, data: out };
}

/** `interpolateLanczos4` (resize.cpp): 8 float taps for fractional offset `x`. */
function lanczos4Coeffs(x: number): Float32Array {
  const s45 = 0.70710678118654752440084436210485;
  const cs = [[1, 0], [-s45, -s45], [0, 1], [s45, -s45], [-1, 0], [s45, s45], [0, -1], [-s45, s45]];
  const coeffs = new Float32Array(8);
  let sum = 0;
  const y0 = -(x + 3) * Math.PI * 0.25;
  const s0 = Math.sin(y0);
  const c0 = Math.cos(y0);
  for (let i = 0; i < 8; i++) {
    const yi = Math.fround(Math.fround(x + 3) - i);
    if (Math.abs(yi) >= Math.fround(1e-6)) {
      const y = -yi * Math.PI * 0.25;
      coeffs[i] = (cs[i][0] * s0 + cs[i][1] * c0) / (y * y);
    } else {
      coeffs[i] = 1e30;
    }
    sum = Math.fround(sum + coeffs[i]);
  }
  const inv = Math.fround(1 / sum);
  for (let i = 0; i < 8; i++) coeffs[i] = Math.fround(coeffs[i] * inv);
  return coeffs;
}

function lanczosTaps(srcLen: number, dstLen: number): { ofs: Int32Array; w: Int16Array } {
  const scale = 1 / (dstLen / srcLen);
  const ofs = new Int32Array(dstLen);
  const w = new Int16Array(dstLen * 8);
  for (let d = 0; d < dstLen; d++) {
    let f = Math.fround((d + 0.5) * scale - 0.5);
    const s = Math.floor(f);
    f = Math.fround(f - s);
    ofs[d] = s;
    const c = lanczos4Coeffs(f);
    for (let k = 0; k < 8; k++) w[d * 8 + k] = cvRound(Math.fround(c[k] * COEF_SCALE));
  }
  return { ofs, w };
}

/**
 * `cv2.resize(..., interpolation=cv2.INTER_LANCZOS4)` on an RGB `uint8`
 * image: 8×8 Lanczos taps in 11-bit fixed point, replicated borders.
 */
export function resizeLanczos4(src: RgbImage, dw: number, dh: number): RgbImage {
  checkSize(src, dw, dh);
  const sw = src.width;
  const sh = src.height;
  if (sw === dw && sh === dh) return copyImage(src);
  const xt = lanczosTaps(sw, dw);
  const yt = lanczosTaps(sh, dh);
  const rowW = dw * 3;
  const rows = new Map<number, Int32Array>();
  const clamp = (v: number, n: number) => (v < 0 ? 0 : v >= n ? n - 1 : v);
  const hrow = (sy: number): Int32Array => {
    let row = rows.get(sy);
    if (row) return row;
    row = new Int32Array(rowW);
    const base = sy * sw * 3;
    for (let dx = 0; dx < dw; dx++) {
      const sx0 = xt.ofs[dx] - 3;
      for (let k = 0; k < 3; k++) {
        let v = 0;
        for (let j = 0; j < 8; j++) {
          v += src.data[base + clamp(sx0 + j, sw) * 3 + k] * xt.w[dx * 8 + j];
        }
        row[dx * 3 + k] = v;
      }
    }
    rows.set(sy, row);
    return row;
  };
  const out = new Uint8Array(dw * dh * 3);
  for (let dy = 0; dy < dh; dy++) {
    const sy0 = yt.ofs[dy] - 3;
    const taps: Int32Array[] = [];
    for (let j = 0; j < 8; j++) taps.push(hrow(clamp(sy0 + j, sh)));
    const o = dy * rowW;
    for (let x = 0; x < rowW; x++) {
      let v = 0;
      for (let j = 0; j < 8; j++) v += taps[j][x] * yt.w[dy * 8 + j];
      out[o + x] = clampU8(shr(v + (1 << 21), 22));
    }
  }
  return { width: dw, height: dh, data: out };
}

/**
 * controlnet_aux `util.py` `resize_image(img, resolution)`: scales the short
 * side to `resolution`, rounds both sides to multiples of 64 (`np.round`,
 * ties to even), and resizes with `INTER_LANCZOS4` when enlarging or
 * `INTER_AREA` otherwise.
 */
export function resizeToResolution(src: RgbImage, resolution: number): RgbImage {
  const { width, height } = resolutionSize(src.width, src.height, resolution);
  const k = resolution / Math.min(src.width, src.height);
  if (k > 1) return resizeLanczos4(src, width, height);
  if (width <= src.width && height <= src.height) return resizeArea(src, width, height);
  // Rounding to 64 can enlarge one side while k <= 1: OpenCV's INTER_AREA then
  // interpolates linearly on that side; bilinear is the closest kernel we have.
  return resizeLinear(src, width, height);
}

/** The target size of {@link resizeToResolution}. */
export function resolutionSize(
  width: number,
  height: number,
  resolution: number,
): { width: number; height: number } {
  const k = resolution / Math.min(width, height);
  return {
    width: Math.max(64, cvRound(width * k / 64) * 64),
    height: Math.max(64, cvRound(height * k / 64) * 64),
  };
}
