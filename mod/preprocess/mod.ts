/**
 * Preprocessors for guided generation: MiDaS/DPT depth maps and DWPose
 * OpenPose renderings, as controlnet_aux produces them, plus the OpenCV
 * kernels they need (resize, warpAffine, rasterisers). Models come in as
 * {@link RunModel} functions, so nothing here touches onnxruntime.
 *
 * @module
 */

export type { Box, Keypoint, PoseResult, RunModel, Tensor } from "./types.ts";
export {
  DEPTH_DETECT_RESOLUTION,
  type DepthModel,
  type DepthOptions,
  depthToImage,
  estimateDepth,
} from "./depth.ts";
export {
  detectPoses,
  estimatePose,
  NO_PERSON_MESSAGE,
  type PoseModels,
  type PoseOptions,
} from "./pose.ts";
export { type DrawParts, drawPoses } from "./draw.ts";
export { toOpenPose } from "./keypoints.ts";
export { resizeArea, resizeLanczos4, resizeLinear, resizeToResolution } from "./resize.ts";
export { warpAffineLinear } from "./warp_affine.ts";
export type { Affine } from "./affine.ts";
export { DETECTOR_SIZE } from "./letterbox.ts";
export { POSE_INPUT_SIZE } from "./pose_input.ts";
