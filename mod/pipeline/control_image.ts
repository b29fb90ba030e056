/**
 * The ControlNet conditioning image of a request, RGB float NCHW `[1, 3, H, W]`:
 * the depth map or pose drawing from the preprocessors (in [0, 1], as diffusers'
 * ControlNet pipelines' `VaeImageProcessor(do_normalize=False)` gives it), or
 * for inpainting the input
 * image in [0, 1] with masked pixels set to −1.
 *
 * @module
 */

import { floatTensor, toFloat32 } from "../onnx/mod.ts";
import { estimateDepth, estimatePose, type RunModel } from "../preprocess/mod.ts";
import { rgbToNchw01 } from "./image_tensors.ts";
import type { LoadedModel, ModelSet } from "./load_models.ts";
import type { GenerationRequest } from "./types.ts";

/**
 * Adapts a loaded model to the preprocessors' {@link RunModel}: feeds are
 * converted to the dtypes the model declares (fp16 models included), outputs
 * come back as float32.
 */
export function runModelOf(model: LoadedModel): RunModel {
  return async (feeds) => {
    const tensors: Record<string, ReturnType<typeof floatTensor>> = {};
    for (const [name, feed] of Object.entries(feeds)) {
      const meta = model.session.inputs.find((m) => m.name === name);
      if (!meta) throw new Error(`${model.path}: the model has no input \`${name}\``);
      tensors[name] = floatTensor(meta.dtype, feed.data, feed.dims);
    }
    // Outputs in the model's output order, as RunModel promises.
    const names = model.session.outputs.map((m) => m.name);
    const out = await model.session.run(tensors, names);
    const result: Record<string, { data: Float32Array; dims: number[] }> = {};
    for (const name of names) {
      result[name] = { data: toFloat32(out[name]), dims: [...out[name].dims] };
    }
    return result;
  };
}

/** The conditioning image of a guided or inpaint request, `[1, 3, H, W]`. */
export async function buildControlImage(
  request: Extract<GenerationRequest, { mode: "guided_image" | "inpaint_image" }>,
  models: ModelSet,
): Promise<Float32Array> {
  const { width, height } = request;
  if (request.mode === "inpaint_image") return rgbToNchw01(request.image, request.mask);
  if (request.controlMode === "depth") {
    const depth = models.depth;
    if (!depth) throw new Error("depth guidance is enabled but the depth model is not loaded");
    const image = await estimateDepth(
      request.image,
      {
        run: runModelOf(depth),
        input: depth.io.inputs.image.name,
        dims: depth.io.inputs.image.shape,
      },
      { width, height, inputRange: depth.inputRange },
    );
    return rgbToNchw01(image);
  }
  const detector = models.poseDetector;
  const estimator = models.poseEstimator;
  if (!detector || !estimator) {
    throw new Error("pose guidance is enabled but the pose models are not loaded");
  }
  const image = await estimatePose(
    request.image,
    {
      detector: runModelOf(detector),
      detectorInput: detector.io.inputs.image.name,
      pose: runModelOf(estimator),
      poseInput: estimator.io.inputs.image.name,
    },
    { handsAndFace: request.controlMode === "openpose_full", width, height },
  );
  return rgbToNchw01(image);
}
