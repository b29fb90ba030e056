/**
 * OpenCV's integer rasterisers for 8-bit, 3-channel images, ported from
 * opencv `modules/imgproc/src/drawing.cpp` (4.x): `clipLine`, `Line`
 * (the `LineIterator` Bresenham walk, 8-connected), `Line2` (16.16 fixed
 * point), `FillConvexPoly`, `Circle` (filled) and `ThickLine` (`LINE_8`).
 * The pose canvas of controlnet_aux is drawn with exactly these, so porting
 * them (rather than drawing "nice" shapes) keeps the control images
 * pixel-identical to the reference preprocessor.
 *
 * Coordinates are plain numbers; C++ `int64` shifts and divisions go through
 * {@link shr}/{@link idiv} so negative and large values behave as in C++.
 *
 * @module
 */

import type { RgbImage } from "../pipeline/types.ts";
import { cvRound, idiv, shl, shr } from "./fixed_point.ts";
import type { Point } from "./ellipse_poly.ts";

/** An RGB colour as the three bytes written to the canvas. */
export type Rgb = readonly [number, number, number];

const XY_SHIFT = 16;
const XY_ONE = 1 << XY_SHIFT;
const HALF = XY_ONE >> 1;

/** Writes one pixel if it is inside the image. */
function putPixel(img: RgbImage, x: number, y: number, c: Rgb): void {
  if (x < 0 || y < 0 || x >= img.width || y >= img.height) return;
  const o = (y * img.width + x) * 3;
  img.data[o] = c[0];
  img.data[o + 1] = c[1];
  img.data[o + 2] = c[2];
}

/** `ICV_HLINE`: fills row `y` from `x1` to `x2` inclusive (callers clip). */
function hline(img: RgbImage, y: number, x1: number, x2: number, c: Rgb): void {
  let o = (y * img.width + x1) * 3;
  for (let x = x1; x <= x2; x++, o += 3) {
    img.data[o] = c[0];
    img.data[o + 1] = c[1];
    img.data[o + 2] = c[2];
  }
}

/**
 * `cv::clipLine(Size2l, Point2l&, Point2l&)`: Cohen–Sutherland clipping to
 * `[0, width-1] × [0, height-1]`, with OpenCV's double-precision
 * intersection truncated toward zero. Mutates the points; returns whether
 * any part of the segment is inside.
 */
export function clipLine(width: number, height: number, p1: Point, p2: Point): boolean {
  if (width <= 0 || height <= 0) return false;
  const right = width - 1;
  const bottom = height - 1;
  const code = (p: Point) =>
    (p.x < 0 ? 1 : 0) + (p.x > right ? 2 : 0) + (p.y < 0 ? 4 : 0) + (p.y > bottom ? 8 : 0);
  let c1 = code(p1);
  let c2 = code(p2);
  if ((c1 & c2) === 0 && (c1 | c2) !== 0) {
    if (c1 & 12) {
      const a = c1 < 8 ? 0 : bottom;
      p1.x += Math.trunc((a - p1.y) * (p2.x - p1.x) / (p2.y - p1.y));
      p1.y = a;
      c1 = (p1.x < 0 ? 1 : 0) + (p1.x > right ? 2 : 0);
    }
    if (c2 & 12) {
      const a = c2 < 8 ? 0 : bottom;
      p2.x += Math.trunc((a - p2.y) * (p2.x - p1.x) / (p2.y - p1.y));
      p2.y = a;
      c2 = (p2.x < 0 ? 1 : 0) + (p2.x > right ? 2 : 0);
    }
    if ((c1 & c2) === 0 && (c1 | c2) !== 0) {
      if (c1) {
        const a = c1 === 1 ? 0 : right;
        p1.y += Math.trunc((a - p1.x) * (p2.y - p1.y) / (p2.x - p1.x));
        p1.x = a;
        c1 = 0;
      }
      if (c2) {
        const a = c2 === 1 ? 0 : right;
        p2.y += Math.trunc((a - p2.x) * (p2.y - p1.y) / (p2.x - p1.x));
        p2.x = a;
        c2 = 0;
      }
    }
  }
  return (c1 | c2) === 0;
}

/**
 * `Line(img, pt1, pt2, color, 8)`: the 8-connected `LineIterator` walk
 * (left to right), after clipping both ends into the image.
 */
export function line8(img: RgbImage, a: Point, b: Point, c: Rgb): void {
  const p1 = { ...a };
  const p2 = { ...b };
  const outside = (p: Point) => p.x < 0 || p.x >= img.width || p.y < 0 || p.y >= img.height;
  if ((outside(p1) || outside(p2)) && !clipLine(img.width, img.height, p1, p2)) return;

  let dx = p2.x - p1.x;
  let dy = p2.y - p1.y;
  let x = p1.x;
  let y = p1.y;
  if (dx < 0) { // left_to_right: start from the left end
    dx = -dx;
    dy = -dy;
    x = p2.x;
    y = p2.y;
  }
  let stepY = 1;
  if (dy < 0) {
    dy = -dy;
    stepY = -1;
  }
  const vertical = dy > dx;
  const major = vertical ? dy : dx;
  const minor = vertical ? dx : dy;
  let err = major - (minor + minor);
  const plusDelta = major + major;
  const minusDelta = -(minor + minor);
  const count = major + 1;
  for (let i = 0; i < count; i++) {
    putPixel(img, x, y, c);
    const bump = err < 0;
    err += minusDelta + (bump ? plusDelta : 0);
    if (vertical) {
      y += stepY;
      if (bump) x += 1;
    } else {
      x += 1;
      if (bump) y += stepY;
    }
  }
}

/** `Line2`: a line between 16.16 fixed-point ends, used for polygon edges when `shift > 0`. */
function line2(img: RgbImage, a: Point, b: Point, c: Rgb): void {
  const p1 = { ...a };
  const p2 = { ...b };
  if (!clipLine(shl(img.width, XY_SHIFT), shl(img.height, XY_SHIFT), p1, p2)) return;
  let dx = p2.x - p1.x;
  let dy = p2.y - p1.y;
  const ax = Math.abs(dx);
  const ay = Math.abs(dy);
  let xStep: number;
  let yStep: number;
  let ecount: number;
  if (ax > ay) {
    if (dx < 0) {
      swapPoints(p1, p2);
      dy = -dy;
    }
    xStep = XY_ONE;
    yStep = idiv(dy * XY_ONE, ax % 2 === 0 ? ax + 1 : ax);
    ecount = shr(p2.x - p1.x, XY_SHIFT);
  } else {
    if (dy < 0) {
      swapPoints(p1, p2);
      dx = -dx;
    }
    xStep = idiv(dx * XY_ONE, ay % 2 === 0 ? ay + 1 : ay);
    yStep = XY_ONE;
    ecount = shr(p2.y - p1.y, XY_SHIFT);
  }
  let x = p1.x + HALF;
  let y = p1.y + HALF;
  putPixel(img, shr(p2.x + HALF, XY_SHIFT), shr(p2.y + HALF, XY_SHIFT), c);
  if (ax > ay) {
    x = shr(x, XY_SHIFT);
    for (; ecount >= 0; ecount--) {
      putPixel(img, x, shr(y, XY_SHIFT), c);
      x++;
      y += yStep;
    }
  } else {
    y = shr(y, XY_SHIFT);
    for (; ecount >= 0; ecount--) {
      putPixel(img, shr(x, XY_SHIFT), y, c);
      x += xStep;
      y++;
    }
  }
}

function swapPoints(p: Point, q: Point): void {
  const x = p.x;
  const y = p.y;
  p.x = q.x;
  p.y = q.y;
  q.x = x;
  q.y = y;
}

/**
 * `FillConvexPoly(img, v, npts, color, LINE_8, shift)`: draws the outline
 * (Bresenham for `shift == 0`, `Line2` otherwise), then scan-fills between
 * the two edge walkers exactly as OpenCV does, including its rounding of
 * edge slopes and its shared edge budget.
 */
export function fillConvexPoly(img: RgbImage, v: readonly Point[], c: Rgb, shift = 0): void {
  const npts = v.length;
  if (npts === 0) return;
  const delta = shift === 0 ? 0 : shl(1, shift) / 2;
  const up = XY_SHIFT - shift;
  let p0 = { x: shl(v[npts - 1].x, up), y: shl(v[npts - 1].y, up) };
  let xmin = v[0].x;
  let xmax = v[0].x;
  let ymin = v[0].y;
  let ymax = v[0].y;
  let imin = 0;
  for (let i = 0; i < npts; i++) {
    const q = v[i];
    if (q.y < ymin) {
      ymin = q.y;
      imin = i;
    }
    ymax = Math.max(ymax, q.y);
    xmax = Math.max(xmax, q.x);
    xmin = Math.min(xmin, q.x);
    const p = { x: shl(q.x, up), y: shl(q.y, up) };
    if (shift === 0) {
      line8(img, { x: shr(p0.x, XY_SHIFT), y: shr(p0.y, XY_SHIFT) }, {
        x: shr(p.x, XY_SHIFT),
        y: shr(p.y, XY_SHIFT),
      }, c);
    } else {
      line2(img, p0, p, c);
    }
    p0 = p;
  }
  xmin = shr(xmin + delta, shift);
  xmax = shr(xmax + delta, shift);
  ymin = shr(ymin + delta, shift);
  ymax = shr(ymax + delta, shift);
  if (npts < 3 || xmax < 0 || ymax < 0 || xmin >= img.width || ymin >= img.height) return;
  ymax = Math.min(ymax, img.height - 1);

  const edge = [
    { idx: imin, di: 1, x: -XY_ONE, dx: 0, ye: ymin },
    { idx: imin, di: npts - 1, x: -XY_ONE, dx: 0, ye: ymin },
  ];
  let edges = npts;
  let y = ymin;
  do {
    for (let i = 0; i < 2; i++) {
      const e = edge[i];
      if (y < e.ye) continue;
      let idx0 = e.idx;
      let idx = idx0 + e.di;
      if (idx >= npts) idx -= npts;
      while (edges-- > 0) {
        const ty = shr(v[idx].y + delta, shift);
        if (ty > y) {
          const xs = shl(v[idx0].x, up);
          const xe = shl(v[idx].x, up);
          e.ye = ty;
          e.dx = idiv((xe - xs) * 2 + (ty - y), 2 * (ty - y));
          e.x = xs;
          e.idx = idx;
          break;
        }
        idx0 = idx;
        idx += e.di;
        if (idx >= npts) idx -= npts;
      }
    }
    if (edges < 0) break;
    if (y >= 0) {
      const [l, r] = edge[0].x > edge[1].x ? [edge[1], edge[0]] : [edge[0], edge[1]];
      let x1 = shr(l.x + HALF, XY_SHIFT);
      let x2 = shr(r.x + HALF, XY_SHIFT);
      if (x2 >= 0 && x1 < img.width) {
        if (x1 < 0) x1 = 0;
        if (x2 >= img.width) x2 = img.width - 1;
        hline(img, y, x1, x2, c);
      }
    }
    edge[0].x += edge[0].dx;
    edge[1].x += edge[1].dx;
  } while (++y <= ymax);
}

/**
 * `cv2.circle(img, center, radius, color, thickness=-1)` with `LINE_8`:
 * OpenCV's `Circle(..., fill=1)` midpoint walk, spans clipped to the image.
 */
export function fillCircle(img: RgbImage, center: Point, radius: number, c: Rgb): void {
  let err = 0;
  let dx = radius;
  let dy = 0;
  let plus = 1;
  let minus = radius * 2 - 1;
  const span = (y: number, xa: number, xb: number) => {
    if (y < 0 || y >= img.height) return;
    const x1 = Math.max(xa, 0);
    const x2 = Math.min(xb, img.width - 1);
    if (x1 <= x2) hline(img, y, x1, x2, c);
  };
  while (dx >= dy) {
    span(center.y - dy, center.x - dx, center.x + dx);
    span(center.y + dy, center.x - dx, center.x + dx);
    span(center.y - dx, center.x - dy, center.x + dy);
    span(center.y + dx, center.x - dy, center.x + dy);
    dy++;
    err += plus;
    plus += 2;
    if (err > 0) {
      err -= minus;
      dx -= 1;
      minus -= 2;
    }
  }
}

/**
 * `cv2.line(img, pt1, pt2, color, thickness)` with `LINE_8` and `shift = 0`
 * (`ThickLine` with both round caps): thickness 1 is a Bresenham line;
 * thicker lines are a 16.16 fixed-point quadrilateral filled with
 * `FillConvexPoly` plus a filled circle of radius round(thickness/2) at
 * each end.
 */
export function drawLine(img: RgbImage, a: Point, b: Point, c: Rgb, thickness: number): void {
  if (!(thickness > 0)) throw new RangeError(`line thickness must be > 0, got ${thickness}`);
  if (thickness <= 1) {
    line8(img, a, b, c);
    return;
  }
  const p0 = { x: shl(a.x, XY_SHIFT), y: shl(a.y, XY_SHIFT) };
  const p1 = { x: shl(b.x, XY_SHIFT), y: shl(b.y, XY_SHIFT) };
  const dx = (p0.x - p1.x) / XY_ONE;
  const dy = (p1.y - p0.y) / XY_ONE;
  const r2 = dx * dx + dy * dy;
  const odd = thickness & 1;
  const t = shl(thickness, XY_SHIFT - 1);
  if (Math.abs(r2) > Number.EPSILON) {
    const r = (t + odd * XY_ONE * 0.5) / Math.sqrt(r2);
    const dpx = cvRound(dy * r);
    const dpy = cvRound(dx * r);
    fillConvexPoly(
      img,
      [
        { x: p0.x + dpx, y: p0.y + dpy },
        { x: p0.x - dpx, y: p0.y - dpy },
        { x: p1.x - dpx, y: p1.y - dpy },
        { x: p1.x + dpx, y: p1.y + dpy },
      ],
      c,
      XY_SHIFT,
    );
  }
  const capRadius = shr(t + HALF, XY_SHIFT);
  for (const p of [p0, p1]) {
    fillCircle(img, { x: shr(p.x + HALF, XY_SHIFT), y: shr(p.y + HALF, XY_SHIFT) }, capRadius, c);
  }
}
