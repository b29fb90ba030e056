/**
 * `cv2.ellipse2Poly` (integer overload), ported from opencv
 * `modules/imgproc/src/drawing.cpp` (`ellipse2Poly`, `sincos`, `SinTable`).
 * OpenCV does not call `sin`/`cos` here: it reads a table of sin(k°) rounded
 * to 7 decimals and stored as `float`, then rounds every vertex with `cvRound`.
 * Reproducing the table is what makes the limb polygons pixel-identical.
 *
 * @module
 */

import { cvRound } from "./fixed_point.ts";

/** An integer pixel position. */
export interface Point {
  x: number;
  y: number;
}

/** sin(0°..90°) exactly as written in OpenCV's `SinTable` (float literals). */
const QUADRANT = [
  0.0000000,
  0.0174524,
  0.0348995,
  0.0523360,
  0.0697565,
  0.0871557,
  0.1045285,
  0.1218693,
  0.1391731,
  0.1564345,
  0.1736482,
  0.1908090,
  0.2079117,
  0.2249511,
  0.2419219,
  0.2588190,
  0.2756374,
  0.2923717,
  0.3090170,
  0.3255682,
  0.3420201,
  0.3583679,
  0.3746066,
  0.3907311,
  0.4067366,
  0.4226183,
  0.4383711,
  0.4539905,
  0.4694716,
  0.4848096,
  0.5000000,
  0.5150381,
  0.5299193,
  0.5446390,
  0.5591929,
  0.5735764,
  0.5877853,
  0.6018150,
  0.6156615,
  0.6293204,
  0.6427876,
  0.6560590,
  0.6691306,
  0.6819984,
  0.6946584,
  0.7071068,
  0.7193398,
  0.7313537,
  0.7431448,
  0.7547096,
  0.7660444,
  0.7771460,
  0.7880108,
  0.7986355,
  0.8090170,
  0.8191520,
  0.8290376,
  0.8386706,
  0.8480481,
  0.8571673,
  0.8660254,
  0.8746197,
  0.8829476,
  0.8910065,
  0.8987940,
  0.9063078,
  0.9135455,
  0.9205049,
  0.9271839,
  0.9335804,
  0.9396926,
  0.9455186,
  0.9510565,
  0.9563048,
  0.9612617,
  0.9659258,
  0.9702957,
  0.9743701,
  0.9781476,
  0.9816272,
  0.9848078,
  0.9876883,
  0.9902681,
  0.9925462,
  0.9945219,
  0.9961947,
  0.9975641,
  0.9986295,
  0.9993908,
  0.9998477,
  1.0000000,
];

/**
 * OpenCV's 451-entry `SinTable` (0°..450°, so that cos(a) = table[450 - a]),
 * with each entry rounded to float32 as the C++ `float` array stores it.
 */
export const SIN_TABLE: Float32Array = (() => {
  const table = new Float32Array(451);
  for (let deg = 0; deg <= 450; deg++) {
    const d = deg % 360;
    let v: number;
    if (d <= 90) v = QUADRANT[d];
    else if (d <= 180) v = QUADRANT[180 - d];
    else if (d <= 270) v = -QUADRANT[d - 180];
    else v = -QUADRANT[360 - d];
    table[deg] = v;
  }
  return table;
})();

/**
 * Polygon approximating an elliptic arc, as `cv2.ellipse2Poly(center, axes,
 * angle, arcStart, arcEnd, delta)` returns it: vertices every `delta`
 * degrees, rotated by `angle` (integer degrees), rounded with `cvRound`,
 * consecutive duplicates dropped; a single remaining vertex becomes
 * `[center, center]`.
 */
export function ellipse2Poly(
  center: Point,
  axes: { width: number; height: number },
  angle: number,
  arcStart: number,
  arcEnd: number,
  delta: number,
): Point[] {
  if (!(delta > 0 && delta <= 180)) {
    throw new RangeError(`ellipse2Poly: delta must be in 1..180, got ${delta}`);
  }
  while (angle < 0) angle += 360;
  while (angle > 360) angle -= 360;
  if (arcStart > arcEnd) [arcStart, arcEnd] = [arcEnd, arcStart];
  while (arcStart < 0) {
    arcStart += 360;
    arcEnd += 360;
  }
  while (arcEnd > 360) {
    arcEnd -= 360;
    arcStart -= 360;
  }
  if (arcEnd - arcStart > 360) {
    arcStart = 0;
    arcEnd = 360;
  }
  // sincos(): alpha = cos(angle), beta = sin(angle), both table floats.
  const a = angle < 0 ? angle + 360 : angle;
  const beta = SIN_TABLE[a];
  const alpha = SIN_TABLE[450 - a];

  const out: Point[] = [];
  let prevX = Number.NaN;
  let prevY = Number.NaN;
  for (let i = arcStart; i < arcEnd + delta; i += delta) {
    let deg = i;
    if (deg > arcEnd) deg = arcEnd;
    if (deg < 0) deg += 360;
    const x = axes.width * SIN_TABLE[450 - deg];
    const y = axes.height * SIN_TABLE[deg];
    const px = cvRound(center.x + x * alpha - y * beta);
    const py = cvRound(center.y + x * beta + y * alpha);
    if (px !== prevX || py !== prevY) {
      out.push({ x: px, y: py });
      prevX = px;
      prevY = py;
    }
  }
  if (out.length === 1) return [{ ...center }, { ...center }];
  return out;
}
