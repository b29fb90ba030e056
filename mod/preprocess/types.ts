/**
 * Shared shapes of the preprocessors: the model-call function the pipeline
 * hands in (so this folder never imports onnxruntime), tensors, and pose
 * keypoints in the OpenPose layout that controlnet_aux draws.
 *
 * @module
 */

/** A float32 tensor: row-major data and its dimensions. */
export interface Tensor {
  /** The values, row-major; length is the product of {@link dims}. */
  data: Float32Array;
  /** The shape, outermost first (e.g. NCHW `[1, 3, H, W]`). */
  dims: number[];
}

/**
 * Runs one ONNX model: named input tensors in, named output tensors out (in
 * the model's output order). The pipeline adapts `mod/onnx` sessions to this.
 */
export type RunModel = (feeds: Record<string, Tensor>) => Promise<Record<string, Tensor>>;

/** A detected keypoint in pixel coordinates with its confidence. */
export interface Keypoint {
  /** Horizontal position in pixels, from the left edge. */
  x: number;
  /** Vertical position in pixels, from the top edge. */
  y: number;
  /** DWPose confidence (SimCC peak); a {@link PoseResult} keeps points scoring >= 0.3. */
  score: number;
}

/**
 * One person in controlnet_aux's `PoseResult` layout: 18 OpenPose body
 * points (null = not visible), 21-point hands and 70-point face (68 DWPose
 * face points + the two eyes), each null when no point of it is visible.
 */
export interface PoseResult {
  /** The 18 body points in OpenPose-18 order (0 nose, 1 neck, …, 17 L-ear); null = not visible. */
  body: Array<Keypoint | null>;
  /** The 21 left-hand points, or null when none is visible. */
  leftHand: Array<Keypoint | null> | null;
  /** The 21 right-hand points, or null when none is visible. */
  rightHand: Array<Keypoint | null> | null;
  /** The 68 DWPose face points plus the two eyes, or null when none is visible. */
  face: Array<Keypoint | null> | null;
}

/** An axis-aligned box `(x1, y1)`–`(x2, y2)` in pixels with its score. */
export interface Box {
  /** Left edge in pixels. */
  x1: number;
  /** Top edge in pixels. */
  y1: number;
  /** Right edge in pixels. */
  x2: number;
  /** Bottom edge in pixels. */
  y2: number;
  /** Detector confidence: objectness × class score. */
  score: number;
}
