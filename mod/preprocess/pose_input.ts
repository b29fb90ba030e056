/**
 * Top-down crops for the DWPose whole-body model (Fannovel16/
 * comfyui_controlnet_aux `dwpose/dw_onnx/cv_ox_pose.py`, which follows
 * mmpose): per person box, `bbox_xyxy2cs` with padding 1.25, the scale
 * widened to the model's aspect ratio (w/h = 288/384 = 0.75), mmpose's
 * `get_warp_matrix` (three float32 point pairs → `cv2.getAffineTransform`),
 * `cv2.warpAffine` (INTER_LINEAR) to 288×384, then ImageNet mean/std
 * normalisation, NCHW float32, all boxes in one batch.
 *
 * @module
 */

import type { RgbImage } from "../pipeline/types.ts";
import { type Affine, getAffineTransform } from "./affine.ts";
import type { Box, Tensor } from "./types.ts";
import { warpAffineLinear } from "./warp_affine.ts";

const f = Math.fround;

/** Input size of `dw-ll_ucoco_384.onnx` as `(width, height)`. */
export const POSE_INPUT_SIZE = { width: 288, height: 384 } as const;
/** mmpose pixel mean (RGB). */
export const POSE_MEAN = [123.675, 116.28, 103.53] as const;
/** mmpose pixel standard deviation (RGB). */
export const POSE_STD = [58.395, 57.12, 57.375] as const;
/** `bbox_xyxy2cs(bbox, padding=1.25)`. */
export const BOX_PADDING = 1.25;

/** A box as centre and size (mmpose "scale"), in pixels. */
export interface CenterScale {
  cx: number;
  cy: number;
  w: number;
  h: number;
}

/** `bbox_xyxy2cs`: centre of the box and its size times `padding`. */
export function bboxToCenterScale(box: Box, padding: number = BOX_PADDING): CenterScale {
  return {
    cx: (box.x1 + box.x2) * 0.5,
    cy: (box.y1 + box.y2) * 0.5,
    w: (box.x2 - box.x1) * padding,
    h: (box.y2 - box.y1) * padding,
  };
}

/** `_fix_aspect_ratio`: grows the shorter side so that w/h equals `aspect`. */
export function fixAspectRatio(cs: CenterScale, aspect: number): CenterScale {
  return cs.w > cs.h * aspect
    ? { ...cs, w: cs.w, h: cs.w / aspect }
    : { ...cs, w: cs.h * aspect, h: cs.h };
}

/**
 * mmpose `get_warp_matrix(center, scale, rot=0, output_size)`: the forward
 * affine map from the image to the `outW`×`outH` crop. The three point pairs
 * live in float32 arrays in mmpose, so they are rounded the same way here.
 */
export function getWarpMatrix(cs: CenterScale, outW: number, outH: number): Affine {
  // src_dir = rotate([0, -w/2], 0) = [0, -w/2]; dst_dir = [0, -outW/2].
  const s0 = { x: f(cs.cx), y: f(cs.cy) };
  const s1 = { x: f(cs.cx + 0), y: f(cs.cy + cs.w * -0.5) };
  const s2 = thirdPoint(s0, s1);
  const d0 = { x: f(outW * 0.5), y: f(outH * 0.5) };
  const d1 = { x: f(outW * 0.5 + 0), y: f(outH * 0.5 + outW * -0.5) };
  const d2 = thirdPoint(d0, d1);
  return getAffineTransform([s0, s1, s2], [d0, d1, d2]);
}

/** `_get_3rd_point(a, b)`: `a - b` turned 90° anticlockwise around `b`, in float32. */
function thirdPoint(a: { x: number; y: number }, b: { x: number; y: number }) {
  const dx = f(a.x - b.x);
  const dy = f(a.y - b.y);
  return { x: f(b.x - dy), y: f(b.y + dx) };
}

/** The batched pose-model input and what is needed to map keypoints back. */
export interface PoseBatch {
  tensor: Tensor;
  /** Per box: the aspect-fixed centre and scale used for the crop. */
  boxes: CenterScale[];
}

/** Crops and normalises every box into one `[N, 3, 384, 288]` tensor (see module doc). */
export function preparePoseBatch(
  image: RgbImage,
  boxes: readonly Box[],
  size: { width: number; height: number } = POSE_INPUT_SIZE,
): PoseBatch {
  const { width, height } = size;
  const plane = width * height;
  const data = new Float32Array(boxes.length * 3 * plane);
  const used: CenterScale[] = [];
  boxes.forEach((box, n) => {
    const cs = fixAspectRatio(bboxToCenterScale(box), width / height);
    used.push(cs);
    const crop = warpAffineLinear(image, getWarpMatrix(cs, width, height), width, height);
    const base = n * 3 * plane;
    for (let i = 0; i < plane; i++) {
      for (let c = 0; c < 3; c++) {
        data[base + c * plane + i] = (crop.data[i * 3 + c] - POSE_MEAN[c]) / POSE_STD[c];
      }
    }
  });
  return { tensor: { data, dims: [boxes.length, 3, height, width] }, boxes: used };
}
