/**
 * COCO-WholeBody (133 points) → controlnet_aux's OpenPose layout, as
 * Fannovel16/comfyui_controlnet_aux `dwpose/wholebody.py` does it:
 *
 * - neck = mean of the shoulders (5, 6); its score is 1 when both shoulder
 *   scores are > 0.3, else 0; inserted at index 17 (134 points);
 * - `new[[1,2,3,4,6,7,8,9,10,12,13,14,15,16,17]] =
 *    new[[17,6,8,10,7,9,12,14,16,13,15,2,1,4,3]]` (mmpose → OpenPose order);
 * - body `[0:18]`, face `[24:92]` (+ body 14 and 15, the eyes: 70 points),
 *   left hand `[92:113]`, right hand `[113:134]`; feet `[18:24]` unused;
 * - a point with score < 0.3 is absent; a part with no point is absent
 *   (the body then is 18 absent points).
 *
 * OpenPose-18 order: 0 nose, 1 neck, 2 R-shoulder, 3 R-elbow, 4 R-wrist,
 * 5 L-shoulder, 6 L-elbow, 7 L-wrist, 8 R-hip, 9 R-knee, 10 R-ankle, 11 L-hip,
 * 12 L-knee, 13 L-ankle, 14 R-eye, 15 L-eye, 16 R-ear, 17 L-ear.
 *
 * @module
 */

import type { Keypoint, PoseResult } from "./types.ts";

/** COCO-WholeBody keypoint count. */
export const WHOLEBODY_POINTS = 133;
/** Visibility threshold of `format_result` (`score >= 0.3`). */
export const KEYPOINT_THRESHOLD = 0.3;
const OPENPOSE_IDX = [1, 2, 3, 4, 6, 7, 8, 9, 10, 12, 13, 14, 15, 16, 17];
const MMPOSE_IDX = [17, 6, 8, 10, 7, 9, 12, 14, 16, 13, 15, 2, 1, 4, 3];

/**
 * Converts one person's 133 keypoints (`[x, y]` in pixels) and scores into a
 * {@link PoseResult}.
 */
export function toOpenPose(
  points: ReadonlyArray<readonly [number, number]>,
  scores: ArrayLike<number>,
): PoseResult {
  if (points.length !== WHOLEBODY_POINTS || scores.length !== WHOLEBODY_POINTS) {
    throw new RangeError(
      `expected ${WHOLEBODY_POINTS} whole-body keypoints and scores, got ${points.length} and ${scores.length}`,
    );
  }
  const info: Keypoint[] = points.map(([x, y], i) => ({ x, y, score: scores[i] }));
  const l = info[5];
  const r = info[6];
  const neck: Keypoint = {
    x: (l.x + r.x) / 2,
    y: (l.y + r.y) / 2,
    score: l.score > KEYPOINT_THRESHOLD && r.score > KEYPOINT_THRESHOLD ? 1 : 0,
  };
  const all = [...info.slice(0, 17), neck, ...info.slice(17)];
  const picked = MMPOSE_IDX.map((i) => all[i]);
  OPENPOSE_IDX.forEach((i, k) => (all[i] = picked[k]));

  const part = (from: number, to: number): Array<Keypoint | null> | null => {
    const list = all.slice(from, to).map((p) => (p.score >= KEYPOINT_THRESHOLD ? { ...p } : null));
    return list.every((p) => p === null) ? null : list;
  };
  const body = part(0, 18) ?? new Array<Keypoint | null>(18).fill(null);
  const face = part(24, 92);
  if (face) face.push(body[14], body[15]);
  return { body, leftHand: part(92, 113), rightHand: part(113, 134), face };
}
