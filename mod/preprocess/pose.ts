/**
 * OpenPose control images from DWPose in ONNX (the `DwposeDetector` path of
 * Fannovel16/comfyui_controlnet_aux): YOLOX person boxes (`letterbox.ts`,
 * `yolox.ts`), whole-body keypoints per box (`pose_input.ts`, `simcc.ts`),
 * the OpenPose layout (`keypoints.ts`) and controlnet_aux's drawing
 * (`draw.ts`).
 *
 * Canvas: drawn directly at the generation size. comfyui draws on a canvas
 * of the input image's size and only then resizes it to the detect
 * resolution; our input image is already resized to the generation size, so
 * drawing there is the same drawing without a blurring resize. If the image
 * has another size, keypoints are scaled to the canvas before drawing.
 *
 * @module
 */

import type { RgbImage } from "../pipeline/types.ts";
import { ToolError } from "../mcp/tool.ts";
import { log } from "../log/mod.ts";
import { drawPoses } from "./draw.ts";
import { checkOutputSize } from "./output_size.ts";
import { toOpenPose } from "./keypoints.ts";
import { DETECTOR_SIZE, letterbox } from "./letterbox.ts";
import { POSE_INPUT_SIZE, preparePoseBatch } from "./pose_input.ts";
import { decodeSimcc, mapToImage, SIMCC_SPLIT_RATIO } from "./simcc.ts";
import type { Keypoint, PoseResult, RunModel, Tensor } from "./types.ts";
import { detectPersons } from "./yolox.ts";

/** The two DWPose models as the pipeline hands them over. */
export interface PoseModels {
  /** `yolox_l.onnx`: `[1, 3, 640, 640]` → `[1, 8400, 85]`. */
  detector: RunModel;
  /** Name of the detector's image input. */
  detectorInput: string;
  /** `dw-ll_ucoco_384.onnx`: `[N, 3, 384, 288]` → `simcc_x [N, 133, 576]`, `simcc_y [N, 133, 768]`. */
  pose: RunModel;
  /** Name of the pose model's image input. */
  poseInput: string;
}

/** What to draw and at which size. */
export interface PoseOptions {
  /** `openpose_full` (body, hands, face) when true; `openpose` (body) when false. */
  handsAndFace: boolean;
  /** Width of the control image in pixels. */
  width: number;
  /** Height of the control image in pixels. */
  height: number;
}

/** The error for an image without a detectable person. */
export const NO_PERSON_MESSAGE =
  'no person found in input_image: the pose detector found no person with score > 0.3; use a photo with a clearly visible person or control_mode "depth"';

/**
 * The SimCC outputs: by name (`simcc_x`, `simcc_y`), else by their last
 * dimension (2 × crop width for x, 2 × crop height for y), else by order.
 */
function pickSimcc(outputs: Record<string, Tensor>): [Tensor, Tensor] {
  const named = [outputs["simcc_x"], outputs["simcc_y"]];
  if (named[0] && named[1]) return [named[0], named[1]];
  const list = Object.values(outputs);
  if (list.length < 2) {
    throw new ToolError(
      "inference",
      `the pose model returned ${list.length} output(s); expected simcc_x and simcc_y`,
    );
  }
  const last = (t: Tensor) => t.dims[t.dims.length - 1];
  const x = list.find((t) => last(t) === POSE_INPUT_SIZE.width * SIMCC_SPLIT_RATIO);
  const y = list.find((t) => last(t) === POSE_INPUT_SIZE.height * SIMCC_SPLIT_RATIO);
  return x && y ? [x, y] : [list[0], list[1]];
}

/** Runs `fn`, turning shape errors (RangeError) about model outputs into inference tool errors. */
function asInference<T>(fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    if (e instanceof RangeError) throw new ToolError("inference", e.message);
    throw e;
  }
}

/** Runs detector and pose model and returns the keypoints of every person in image pixels. */
export async function detectPoses(image: RgbImage, models: PoseModels): Promise<PoseResult[]> {
  const boxed = letterbox(image);
  const detOut = Object.values(await models.detector({ [models.detectorInput]: boxed.tensor }))[0];
  if (!detOut) throw new ToolError("inference", "the pose detector returned no output");
  const boxes = asInference(() => detectPersons(detOut, boxed.ratio, DETECTOR_SIZE));
  if (boxes.length === 0) throw new ToolError("image", NO_PERSON_MESSAGE);

  const batch = preparePoseBatch(image, boxes, POSE_INPUT_SIZE);
  const [sx, sy] = pickSimcc(await models.pose({ [models.poseInput]: batch.tensor }));
  const decoded = asInference(() => decodeSimcc(sx, sy));
  if (decoded.instances !== boxes.length) {
    throw new ToolError(
      "inference",
      `the pose model returned ${decoded.instances} instance(s) for ${boxes.length} box(es)`,
    );
  }
  const poses: PoseResult[] = [];
  for (let n = 0; n < decoded.instances; n++) {
    const points = mapToImage(decoded, n, batch.boxes[n], POSE_INPUT_SIZE);
    const scores = decoded.scores.subarray(n * decoded.keypoints, (n + 1) * decoded.keypoints);
    poses.push(asInference(() => toOpenPose(points, scores)));
  }
  log("debug", "preprocess", "poses", { people: poses.length });
  return poses;
}

/** Scales every keypoint of `poses` by (sx, sy); returns new objects. */
export function scalePoses(poses: readonly PoseResult[], sx: number, sy: number): PoseResult[] {
  if (sx === 1 && sy === 1) return [...poses];
  const k = (p: Keypoint | null) => (p ? { x: p.x * sx, y: p.y * sy, score: p.score } : null);
  const part = (list: Array<Keypoint | null> | null) => (list ? list.map(k) : null);
  return poses.map((p) => ({
    body: p.body.map(k),
    leftHand: part(p.leftHand),
    rightHand: part(p.rightHand),
    face: part(p.face),
  }));
}

/**
 * The OpenPose control image for `image` at `options.width`×`options.height`.
 * Throws `ToolError("image", NO_PERSON_MESSAGE)` when the detector finds
 * nobody, or a similar image error when people are found but none has a
 * visible point of the parts to draw (the control image would be black).
 */
export async function estimatePose(
  image: RgbImage,
  models: PoseModels,
  options: PoseOptions,
): Promise<RgbImage> {
  checkOutputSize(options.width, options.height);
  const poses = scalePoses(
    await detectPoses(image, models),
    options.width / image.width,
    options.height / image.height,
  );
  const parts = { body: true, hands: options.handsAndFace, face: options.handsAndFace };
  const visible = poses.some((p) =>
    p.body.some((k) => k !== null) ||
    (parts.hands && (p.leftHand !== null || p.rightHand !== null)) ||
    (parts.face && p.face !== null)
  );
  if (!visible) {
    throw new ToolError(
      "image",
      `no person found in input_image: the pose detector found ${poses.length} person box(es) but no keypoint with score >= 0.3; use a photo with a clearly visible person or control_mode "depth"`,
    );
  }
  return drawPoses(poses, options.width, options.height, parts);
}
