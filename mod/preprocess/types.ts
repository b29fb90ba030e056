/**
 * Shared shapes of the preprocessors: the model-call function the pipeline
 * hands in (so this folder never imports onnxruntime), tensors, and pose
 * keypoints in the OpenPose layout that controlnet_aux draws.
 *
 * @module
 */

/** A float32 tensor: row-major data and its dimensions. */
export interface Tensor {
  data: Float32Array;
  dims: number[];
}

/**
 * Runs one ONNX model: named input tensors in, named output tensors out (in
 * the model's output order). The pipeline adapts `mod/onnx` sessions to this.
 */
export type RunModel = (feeds: Record<string, Tensor>) => Promise<Record<string, Tensor>>;

/** A detected keypoint in pixel coordinates with its confidence. */
export interface Keypoint {
  x: number;
  y: number;
  score: number;
}

/**
 * One person in controlnet_aux's `PoseResult` layout: 18 OpenPose body
 * points (null = not visible), 21-point hands and 70-point face (68 DWPose
 * face points + the two eyes), each null when no point of it is visible.
 */
export interface PoseResult {
  body: Array<Keypoint | null>;
  leftHand: Array<Keypoint | null> | null;
  rightHand: Array<Keypoint | null> | null;
  face: Array<Keypoint | null> | null;
}

/** An axis-aligned box `(x1, y1)`–`(x2, y2)` in pixels with its score. */
export interface Box {
  x1: number;
  y1: number;
  x2: number;
  y2: number;
  score: number;
}
