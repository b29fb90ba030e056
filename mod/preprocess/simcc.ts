/**
 * SimCC decoding of the DWPose whole-body model (Fannovel16/
 * comfyui_controlnet_aux `dwpose/dw_onnx/cv_ox_pose.py` `get_simcc_maximum`,
 * `decode`, `postprocess`): per keypoint, the argmax of the x and y
 * classification vectors, score = min(max_x, max_y), locations -1 where the
 * score is <= 0, divided by `simcc_split_ratio` (2), then mapped from the
 * crop back to the image: `kp / input_size * scale + center - scale / 2`.
 *
 * @module
 */

import type { CenterScale } from "./pose_input.ts";
import type { Tensor } from "./types.ts";

/** `simcc_split_ratio` of `dw-ll_ucoco_384`: the vectors are twice the input size. */
export const SIMCC_SPLIT_RATIO = 2;

/** Decoded keypoints of N instances with K points each, in crop pixels. */
export interface SimccResult {
  /** N×K×2 locations (x, y) in crop pixels; -1 where the score is <= 0. */
  locations: Float32Array;
  /** N×K scores. */
  scores: Float32Array;
  instances: number;
  keypoints: number;
}

/** Argmax decoding of `simcc_x [N, K, Wx]` and `simcc_y [N, K, Wy]`. */
export function decodeSimcc(
  simccX: Tensor,
  simccY: Tensor,
  splitRatio: number = SIMCC_SPLIT_RATIO,
): SimccResult {
  const [n, k, wx] = simccX.dims;
  const [ny, ky, wy] = simccY.dims;
  if (simccX.dims.length !== 3 || simccY.dims.length !== 3 || n !== ny || k !== ky) {
    throw new RangeError(
      `SimCC outputs must be [N, K, Wx] and [N, K, Wy], got [${simccX.dims.join(", ")}] and [${
        simccY.dims.join(", ")
      }]`,
    );
  }
  const locations = new Float32Array(n * k * 2);
  const scores = new Float32Array(n * k);
  for (let i = 0; i < n * k; i++) {
    const [ix, vx] = argmax(simccX.data, i * wx, wx);
    const [iy, vy] = argmax(simccY.data, i * wy, wy);
    const v = vx > vy ? vy : vx;
    scores[i] = v;
    const invalid = v <= 0; // locs[vals <= 0.] = -1, before the split-ratio division
    locations[i * 2] = invalid ? -1 / splitRatio : ix / splitRatio;
    locations[i * 2 + 1] = invalid ? -1 / splitRatio : iy / splitRatio;
  }
  return { locations, scores, instances: n, keypoints: k };
}

/** `np.argmax` (first maximum; a NaN wins, as in numpy) and `np.amax` of one row. */
function argmax(data: Float32Array, offset: number, len: number): [number, number] {
  let best = 0;
  let value = data[offset];
  for (let j = 1; j < len && !Number.isNaN(value); j++) {
    const v = data[offset + j];
    if (v > value || Number.isNaN(v)) {
      best = j;
      value = v;
    }
  }
  return [best, value];
}

/**
 * Maps instance `n`'s keypoints from crop pixels to image pixels with the
 * box it was cropped from; returns `[x, y]` pairs.
 */
export function mapToImage(
  decoded: SimccResult,
  n: number,
  box: CenterScale,
  inputSize: { width: number; height: number },
): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (let j = 0; j < decoded.keypoints; j++) {
    const o = (n * decoded.keypoints + j) * 2;
    out.push([
      decoded.locations[o] / inputSize.width * box.w + box.cx - box.w / 2,
      decoded.locations[o + 1] / inputSize.height * box.h + box.cy - box.h / 2,
    ]);
  }
  return out;
}
