/**
 * Decoding of the YOLOX person detector (`yolox_l.onnx`, output
 * `[1, 8400, 85]`) as DWPose does it (Fannovel16/comfyui_controlnet_aux
 * `dwpose/dw_onnx/cv_ox_det.py` `demo_postprocess` + `inference_detector`):
 *
 * - grid offsets for strides 8/16/32: `xy = (xy + grid) * stride`,
 *   `wh = exp(wh) * stride`;
 * - centre/size to corners, divided by the letterbox ratio;
 * - `scores = objectness * class scores`; class-aware NMS (IoU 0.45, score
 *   0.1); keep class 0 (person) with score > 0.3.
 *
 * numpy keeps these arrays in float32, so values are rounded to float32 at
 * the same steps. numpy's float32 `exp` may differ from `Math.exp` rounded to
 * float32 in the last bit.
 *
 * @module
 */

import { multiclassNms } from "./nms.ts";
import type { Box, Tensor } from "./types.ts";

const f = Math.fround;
/** YOLOX strides (without the P6 level). */
export const STRIDES = [8, 16, 32] as const;
/** `nms_thr` of DWPose's detector call. */
export const NMS_IOU = 0.45;
/** `score_thr` of DWPose's detector call. */
export const SCORE_THRESHOLD = 0.1;
/** Boxes of class 0 must score above this to count as a person. */
export const PERSON_THRESHOLD = 0.3;

/** Number of anchors YOLOX produces for a square input of `size`. */
export function anchorCount(size: number): number {
  return STRIDES.reduce((n, s) => n + Math.floor(size / s) ** 2, 0);
}

/**
 * `demo_postprocess`: returns a decoded copy of the raw `[anchors × (5 + C)]`
 * predictions (first batch item) with boxes in letterboxed pixels as
 * `cx, cy, w, h`.
 */
export function demoPostprocess(raw: Float32Array, channels: number, size: number): Float32Array {
  const anchors = anchorCount(size);
  if (raw.length < anchors * channels) {
    throw new RangeError(
      `YOLOX output has ${raw.length} values, expected ${anchors} anchors x ${channels} for a ${size}px input`,
    );
  }
  const out = new Float32Array(raw.subarray(0, anchors * channels));
  let a = 0;
  for (const stride of STRIDES) {
    const hs = Math.floor(size / stride);
    const ws = Math.floor(size / stride);
    for (let gy = 0; gy < hs; gy++) {
      for (let gx = 0; gx < ws; gx++, a++) {
        const o = a * channels;
        out[o] = f((out[o] + gx) * stride);
        out[o + 1] = f((out[o + 1] + gy) * stride);
        out[o + 2] = f(f(Math.exp(out[o + 2])) * stride);
        out[o + 3] = f(f(Math.exp(out[o + 3])) * stride);
      }
    }
  }
  return out;
}

/**
 * Person boxes in original-image pixels, best first, from the detector
 * output and the letterbox ratio; empty when nobody scores above
 * {@link PERSON_THRESHOLD}.
 */
export function detectPersons(output: Tensor, ratio: number, size: number): Box[] {
  const dims = output.dims;
  const channels = dims[dims.length - 1];
  const anchors = anchorCount(size);
  if (dims.length !== 3 || dims[0] !== 1 || dims[1] !== anchors || channels < 6) {
    throw new RangeError(
      `detector output has shape [${dims.join(", ")}], expected [1, ${anchors}, 5 + classes]`,
    );
  }
  const pred = demoPostprocess(output.data, channels, size);
  const classes = channels - 5;
  const boxes = new Float32Array(anchors * 4);
  const scores = new Float32Array(anchors * classes);
  const r = f(ratio);
  for (let i = 0; i < anchors; i++) {
    const o = i * channels;
    const halfW = f(pred[o + 2] / 2);
    const halfH = f(pred[o + 3] / 2);
    boxes[i * 4] = f(f(pred[o] - halfW) / r);
    boxes[i * 4 + 1] = f(f(pred[o + 1] - halfH) / r);
    boxes[i * 4 + 2] = f(f(pred[o] + halfW) / r);
    boxes[i * 4 + 3] = f(f(pred[o + 1] + halfH) / r);
    const obj = pred[o + 4];
    for (let c = 0; c < classes; c++) scores[i * classes + c] = f(obj * pred[o + 5 + c]);
  }
  // Only class 0 is kept afterwards, and class-aware NMS treats classes independently.
  return multiclassNms(boxes, scores, classes, NMS_IOU, SCORE_THRESHOLD, [0])
    .filter((d) => d.score > PERSON_THRESHOLD)
    .map(({ x1, y1, x2, y2, score }) => ({ x1, y1, x2, y2, score }));
}
