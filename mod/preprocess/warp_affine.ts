/**
 * `cv2.warpAffine(src, M, (w, h), flags=cv2.INTER_LINEAR)` on an RGB `uint8`
 * image with the default `BORDER_CONSTANT` (black), ported from opencv
 * `modules/imgproc/src/imgwarp.cpp` (`warpAffine`, `WarpAffineInvoker`,
 * `warpAffineBlockline`, `remapBilinear`, `initInterTab2D`):
 *
 * - the forward matrix is inverted ({@link invertAffine});
 * - source coordinates are accumulated in fixed point with 10 fractional
 *   bits (`AB_BITS`), rounded to 1/32 pixel (`INTER_BITS = 5`);
 * - each output is the bilinear mix of the four neighbours with 15-bit
 *   weights from the 32×32 table, `(sum + 2^14) >> 15`; neighbours outside
 *   the image count as 0.
 *
 * @module
 */

import type { RgbImage } from "../pipeline/types.ts";
import { type Affine, invertAffine } from "./affine.ts";
import { clampU8, cvRound, shr } from "./fixed_point.ts";

const INTER_BITS = 5;
const INTER_TAB_SIZE = 1 << INTER_BITS;
const AB_BITS = 10;
const AB_SCALE = 1 << AB_BITS;
const ROUND_DELTA = AB_SCALE / INTER_TAB_SIZE / 2;
const COEF_BITS = 15;

/** `saturate_cast<int>(double)`. */
function satInt(v: number): number {
  const r = cvRound(v);
  return r > 2147483647 ? 2147483647 : r < -2147483648 ? -2147483648 : r;
}

/** `saturate_cast<short>`. */
function satShort(v: number): number {
  return v > 32767 ? 32767 : v < -32768 ? -32768 : v;
}

/** Warps `src` by the forward affine map `m` into a `width`×`height` image (see module doc). */
export function warpAffineLinear(
  src: RgbImage,
  m: Affine,
  width: number,
  height: number,
): RgbImage {
  if (src.data.length !== src.width * src.height * 3) {
    throw new RangeError(
      `warpAffine: source ${src.width}x${src.height} has ${src.data.length} bytes, expected ${
        src.width * src.height * 3
      }`,
    );
  }
  const M = invertAffine(m);
  const adelta = new Int32Array(width);
  const bdelta = new Int32Array(width);
  for (let x = 0; x < width; x++) {
    adelta[x] = satInt(M[0] * x * AB_SCALE);
    bdelta[x] = satInt(M[3] * x * AB_SCALE);
  }
  const out = new Uint8Array(width * height * 3);
  const sw = src.width;
  const sh = src.height;
  const s = src.data;
  for (let y = 0; y < height; y++) {
    const X0 = satInt((M[1] * y + M[2]) * AB_SCALE) + ROUND_DELTA;
    const Y0 = satInt((M[4] * y + M[5]) * AB_SCALE) + ROUND_DELTA;
    for (let x = 0; x < width; x++) {
      const X = shr(X0 + adelta[x], AB_BITS - INTER_BITS);
      const Y = shr(Y0 + bdelta[x], AB_BITS - INTER_BITS);
      const sx = satShort(shr(X, INTER_BITS));
      const sy = satShort(shr(Y, INTER_BITS));
      const fx = X & (INTER_TAB_SIZE - 1);
      const fy = Y & (INTER_TAB_SIZE - 1);
      // initInterTab2D(INTER_LINEAR): products of 1-D weights (k/32) scaled
      // to 2^15 are exact integers, so no sum correction is ever needed.
      const w00 = (INTER_TAB_SIZE - fy) * (INTER_TAB_SIZE - fx) * 32;
      const w01 = (INTER_TAB_SIZE - fy) * fx * 32;
      const w10 = fy * (INTER_TAB_SIZE - fx) * 32;
      const w11 = fy * fx * 32;
      const o = (y * width + x) * 3;
      if (sx >= sw || sx + 1 < 0 || sy >= sh || sy + 1 < 0) continue; // all border: black
      const in0 = sy >= 0 && sy < sh;
      const in1 = sy + 1 >= 0 && sy + 1 < sh;
      const ix0 = sx >= 0 && sx < sw;
      const ix1 = sx + 1 >= 0 && sx + 1 < sw;
      const p00 = in0 && ix0 ? (sy * sw + sx) * 3 : -1;
      const p01 = in0 && ix1 ? (sy * sw + sx + 1) * 3 : -1;
      const p10 = in1 && ix0 ? ((sy + 1) * sw + sx) * 3 : -1;
      const p11 = in1 && ix1 ? ((sy + 1) * sw + sx + 1) * 3 : -1;
      for (let k = 0; k < 3; k++) {
        const v = (p00 >= 0 ? s[p00 + k] * w00 : 0) + (p01 >= 0 ? s[p01 + k] * w01 : 0) +
          (p10 >= 0 ? s[p10 + k] * w10 : 0) + (p11 >= 0 ? s[p11 + k] * w11 : 0);
        out[o + k] = clampU8(shr(v + (1 << (COEF_BITS - 1)), COEF_BITS));
      }
    }
  }
  return { width, height, data: out };
}
