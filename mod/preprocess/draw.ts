/**
 * The OpenPose control image, drawn as controlnet_aux draws it
 * (huggingface/controlnet_aux `open_pose/util.py`; identical in
 * Fannovel16/comfyui_controlnet_aux `dwpose/util.py` with
 * `xinsr_stick_scaling=False`), with OpenCV's own rasterisers (`raster.ts`):
 *
 * - body: each of the 17 limbs is `cv2.ellipse2Poly(centre, (int(length/2),
 *   4), int(angle), 0, 360, 1)` filled with `fillConvexPoly` in
 *   `int(colour * 0.6)`, then every visible joint a filled circle of radius 4
 *   in its full colour;
 * - hands: 20 edges as 2-px lines in `hsv_to_rgb([i/20, 1, 1]) * 255`, then
 *   every point a filled radius-4 circle in (0, 0, 255);
 * - face: every point a filled radius-3 white circle;
 * - per person: body, left hand, right hand, face.
 *
 * Keypoints are in canvas pixels (comfyui draws DWPose results in pixels;
 * its `is_normalized` guess for lists lying entirely within [0, 1] is not
 * reproduced). Colours are RGB: the canvas goes straight to PIL there.
 *
 * @module
 */

import type { RgbImage } from "../pipeline/types.ts";
import { ellipse2Poly } from "./ellipse_poly.ts";
import { saturateU8 } from "./fixed_point.ts";
import { drawLine, fillCircle, fillConvexPoly, type Rgb } from "./raster.ts";
import type { Keypoint, PoseResult } from "./types.ts";

/** `stickwidth` of `draw_bodypose`. */
export const STICK_WIDTH = 4;
/** Limbs as 1-based OpenPose keypoint pairs (`limbSeq`). */
export const LIMB_SEQ: ReadonlyArray<readonly [number, number]> = [
  [2, 3],
  [2, 6],
  [3, 4],
  [4, 5],
  [6, 7],
  [7, 8],
  [2, 9],
  [9, 10],
  [10, 11],
  [2, 12],
  [12, 13],
  [13, 14],
  [2, 1],
  [1, 15],
  [15, 17],
  [1, 16],
  [16, 18],
];
/** The 18 OpenPose colours (limb i and joint i share colour i). */
export const BODY_COLORS: readonly Rgb[] = [
  [255, 0, 0],
  [255, 85, 0],
  [255, 170, 0],
  [255, 255, 0],
  [170, 255, 0],
  [85, 255, 0],
  [0, 255, 0],
  [0, 255, 85],
  [0, 255, 170],
  [0, 255, 255],
  [0, 170, 255],
  [0, 85, 255],
  [0, 0, 255],
  [85, 0, 255],
  [170, 0, 255],
  [255, 0, 255],
  [255, 0, 170],
  [255, 0, 85],
];
/** The 20 hand edges (0-based keypoint pairs). */
export const HAND_EDGES: ReadonlyArray<readonly [number, number]> = [
  [0, 1],
  [1, 2],
  [2, 3],
  [3, 4],
  [0, 5],
  [5, 6],
  [6, 7],
  [7, 8],
  [0, 9],
  [9, 10],
  [10, 11],
  [11, 12],
  [0, 13],
  [13, 14],
  [14, 15],
  [15, 16],
  [0, 17],
  [17, 18],
  [18, 19],
  [19, 20],
];
const HAND_POINT: Rgb = [0, 0, 255];
const FACE_POINT: Rgb = [255, 255, 255];
/** `eps` of util.py: hand and face points need x and y above it. */
const EPS = 0.01;

/** matplotlib `hsv_to_rgb` for one colour, in float64 as numpy computes it. */
function hsvToRgb(h: number, s: number, v: number): [number, number, number] {
  const i = Math.trunc(h * 6.0);
  const fr = h * 6.0 - i;
  const p = v * (1.0 - s);
  const q = v * (1.0 - s * fr);
  const t = v * (1.0 - s * (1.0 - fr));
  if (s === 0) return [v, v, v];
  switch (i % 6) {
    case 0:
      return [v, t, p];
    case 1:
      return [q, v, p];
    case 2:
      return [p, v, t];
    case 3:
      return [p, q, v];
    case 4:
      return [t, p, v];
    default:
      return [v, p, q];
  }
}

/** Colour of hand edge `i`: `hsv_to_rgb([i / 20, 1, 1]) * 255` as cv2 stores it (`cvRound`). */
export function handEdgeColor(i: number): Rgb {
  const [r, g, b] = hsvToRgb(i / HAND_EDGES.length, 1.0, 1.0);
  return [saturateU8(r * 255), saturateU8(g * 255), saturateU8(b * 255)];
}

/** `draw_bodypose`: limbs (ellipses at 0.6 of the colour), then joints. */
export function drawBodyPose(canvas: RgbImage, body: ReadonlyArray<Keypoint | null>): void {
  LIMB_SEQ.forEach(([a, b], i) => {
    const k1 = body[a - 1];
    const k2 = body[b - 1];
    if (!k1 || !k2) return;
    const mx = (k1.x + k2.x) / 2;
    const my = (k1.y + k2.y) / 2;
    const dy = k1.y - k2.y;
    const dx = k1.x - k2.x;
    const length = Math.sqrt(dy * dy + dx * dx);
    const angle = Math.atan2(dy, dx) * (180 / Math.PI);
    const polygon = ellipse2Poly(
      { x: Math.trunc(mx), y: Math.trunc(my) },
      { width: Math.trunc(length / 2), height: STICK_WIDTH },
      Math.trunc(angle),
      0,
      360,
      1,
    );
    const c = BODY_COLORS[i];
    fillConvexPoly(canvas, polygon, [
      Math.trunc(c[0] * 0.6),
      Math.trunc(c[1] * 0.6),
      Math.trunc(c[2] * 0.6),
    ]);
  });
  body.forEach((k, i) => {
    if (!k || i >= BODY_COLORS.length) return;
    fillCircle(canvas, { x: Math.trunc(k.x), y: Math.trunc(k.y) }, 4, BODY_COLORS[i]);
  });
}

/** `draw_handpose`: 2-px coloured edges, then blue points. */
export function drawHandPose(canvas: RgbImage, hand: ReadonlyArray<Keypoint | null> | null): void {
  if (!hand || hand.length === 0) return;
  HAND_EDGES.forEach(([a, b], i) => {
    const k1 = hand[a];
    const k2 = hand[b];
    if (!k1 || !k2) return;
    const x1 = Math.trunc(k1.x);
    const y1 = Math.trunc(k1.y);
    const x2 = Math.trunc(k2.x);
    const y2 = Math.trunc(k2.y);
    if (x1 > EPS && y1 > EPS && x2 > EPS && y2 > EPS) {
      drawLine(canvas, { x: x1, y: y1 }, { x: x2, y: y2 }, handEdgeColor(i), 2);
    }
  });
  for (const k of hand) {
    if (!k) continue;
    const x = Math.trunc(k.x);
    const y = Math.trunc(k.y);
    if (x > EPS && y > EPS) fillCircle(canvas, { x, y }, 4, HAND_POINT);
  }
}

/** `draw_facepose`: white points of radius 3. */
export function drawFacePose(canvas: RgbImage, face: ReadonlyArray<Keypoint | null> | null): void {
  if (!face || face.length === 0) return;
  for (const k of face) {
    if (!k) continue;
    const x = Math.trunc(k.x);
    const y = Math.trunc(k.y);
    if (x > EPS && y > EPS) fillCircle(canvas, { x, y }, 3, FACE_POINT);
  }
}

/** Which parts {@link drawPoses} draws. */
export interface DrawParts {
  /** Draw the 17 body limbs and 18 joints (controlnet_aux `draw_bodypose`). */
  body: boolean;
  /** Draw both hands' edges and points (`draw_handpose`). */
  hands: boolean;
  /** Draw the face points (`draw_facepose`). */
  face: boolean;
}

/** `draw_poses`: a black `width`×`height` canvas with every person drawn in order. */
export function drawPoses(
  poses: readonly PoseResult[],
  width: number,
  height: number,
  parts: DrawParts,
): RgbImage {
  const canvas: RgbImage = { width, height, data: new Uint8Array(width * height * 3) };
  for (const pose of poses) {
    if (parts.body) drawBodyPose(canvas, pose.body);
    if (parts.hands) {
      drawHandPose(canvas, pose.leftHand);
      drawHandPose(canvas, pose.rightHand);
    }
    if (parts.face) drawFacePose(canvas, pose.face);
  }
  return canvas;
}
