/**
 * YOLOX input preparation as DWPose does it (Fannovel16/comfyui_controlnet_aux
 * `dwpose/dw_onnx/cv_ox_det.py` `preprocess`): scale by
 * `r = min(640/h, 640/w)` with `cv2.INTER_LINEAR`, paste top-left onto a
 * 640×640 canvas filled with 114, HWC→CHW float32 with no normalisation.
 *
 * @module
 */

import type { RgbImage } from "../pipeline/types.ts";
import { resizeLinear } from "./resize.ts";
import type { Tensor } from "./types.ts";

/** The detector's square input side (`yolox_l.onnx`). */
export const DETECTOR_SIZE = 640;
/** Grey value of the padding (`np.ones(...) * 114`). */
export const PAD_VALUE = 114;

/** The detector input and the scale that maps detector pixels back (`boxes /= ratio`). */
export interface Letterboxed {
  tensor: Tensor;
  ratio: number;
  /** Size of the resized image inside the canvas. */
  resizedWidth: number;
  resizedHeight: number;
}

/** Letterboxes `image` into a `[1, 3, size, size]` tensor (see module doc). */
export function letterbox(image: RgbImage, size: number = DETECTOR_SIZE): Letterboxed {
  const ratio = Math.min(size / image.height, size / image.width);
  // int(img.shape[1] * r): truncation; at least one pixel so cv2-like resizing is defined.
  const rw = Math.max(1, Math.trunc(image.width * ratio));
  const rh = Math.max(1, Math.trunc(image.height * ratio));
  const resized = resizeLinear(image, rw, rh);
  const plane = size * size;
  const data = new Float32Array(3 * plane).fill(PAD_VALUE);
  for (let y = 0; y < rh; y++) {
    for (let x = 0; x < rw; x++) {
      const s = (y * rw + x) * 3;
      const d = y * size + x;
      data[d] = resized.data[s];
      data[plane + d] = resized.data[s + 1];
      data[2 * plane + d] = resized.data[s + 2];
    }
  }
  return { tensor: { data, dims: [1, 3, size, size] }, ratio, resizedWidth: rw, resizedHeight: rh };
}
