/**
 * 2×3 affine matrices as OpenCV computes them: `cv2.getAffineTransform`
 * (a 6×6 linear system solved with OpenCV's partial-pivot LU, opencv
 * `modules/imgproc/src/imgwarp.cpp` + `modules/core/src/matrix_decomp.cpp`
 * `LUImpl`) and the inversion `cv::warpAffine` applies before sampling.
 * Porting the solver (instead of writing the closed form) keeps the matrix
 * bit-identical, which matters because `warpAffine` quantises coordinates to
 * 1/32 pixel and a last-bit difference can move a sample.
 *
 * @module
 */

/** A row-major 2×3 affine matrix `[a, b, c, d, e, f]`: x' = a·x + b·y + c, y' = d·x + e·y + f. */
export type Affine = [number, number, number, number, number, number];

/** A point with fractional coordinates. */
export interface Point2 {
  x: number;
  y: number;
}

/**
 * `cv2.getAffineTransform(src, dst)` for three point pairs (the points are
 * taken as given; round them to float32 first where OpenCV receives
 * `float32` arrays).
 */
export function getAffineTransform(src: readonly Point2[], dst: readonly Point2[]): Affine {
  if (src.length !== 3 || dst.length !== 3) {
    throw new RangeError(
      `getAffineTransform needs 3 point pairs, got ${src.length} and ${dst.length}`,
    );
  }
  const a = new Float64Array(36);
  const b = new Float64Array(6);
  for (let i = 0; i < 3; i++) {
    const j = i * 12;
    const k = i * 12 + 6;
    a[j] = a[k + 3] = src[i].x;
    a[j + 1] = a[k + 4] = src[i].y;
    a[j + 2] = a[k + 5] = 1;
    b[i * 2] = dst[i].x;
    b[i * 2 + 1] = dst[i].y;
  }
  if (!luSolve(a, b, 6)) {
    throw new RangeError("getAffineTransform: the three source points are collinear");
  }
  return [b[0], b[1], b[2], b[3], b[4], b[5]];
}

/** OpenCV `LUImpl<double>` with one right-hand side; solves in place into `b`. */
function luSolve(A: Float64Array, b: Float64Array, m: number): boolean {
  const eps = Number.EPSILON * 100;
  for (let i = 0; i < m; i++) {
    let k = i;
    for (let j = i + 1; j < m; j++) {
      if (Math.abs(A[j * m + i]) > Math.abs(A[k * m + i])) k = j;
    }
    if (Math.abs(A[k * m + i]) < eps) return false;
    if (k !== i) {
      for (let j = i; j < m; j++) {
        const t = A[i * m + j];
        A[i * m + j] = A[k * m + j];
        A[k * m + j] = t;
      }
      const t = b[i];
      b[i] = b[k];
      b[k] = t;
    }
    const d = -1 / A[i * m + i];
    for (let j = i + 1; j < m; j++) {
      const alpha = A[j * m + i] * d;
      for (let c = i + 1; c < m; c++) A[j * m + c] += alpha * A[i * m + c];
      b[j] += alpha * b[i];
    }
    A[i * m + i] = -d; // the pivot is kept as its reciprocal
  }
  for (let i = m - 1; i >= 0; i--) {
    let s = b[i];
    for (let c = i + 1; c < m; c++) s -= A[i * m + c] * b[c];
    b[i] = s * A[i * m + i];
  }
  return true;
}

/** The inverse map `cv::warpAffine` builds when `WARP_INVERSE_MAP` is not set (same operation order). */
export function invertAffine(m: Affine): Affine {
  let d = m[0] * m[4] - m[1] * m[3];
  d = d !== 0 ? 1 / d : 0;
  const a11 = m[4] * d;
  const a22 = m[0] * d;
  const a12 = m[1] * -d;
  const a21 = m[3] * -d;
  const b1 = -a11 * m[2] - a12 * m[5];
  const b2 = -a21 * m[2] - a22 * m[5];
  return [a11, a12, b1, a21, a22, b2];
}
