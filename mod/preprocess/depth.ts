/**
 * Depth control images as controlnet_aux's MiDaS detector makes them
 * (huggingface/controlnet_aux `midas/__init__.py`, `util.py`):
 *
 * 1. `HWC3` (our images are RGB already), `resize_image` to the detect
 *    resolution 512 (short side → 512, both sides rounded to multiples of
 *    64; Lanczos4 enlarging, area shrinking) — or, for a model whose input
 *    has fixed spatial dims (e.g. `[1, 3, 384, 384]`), straight to that size;
 * 2. `x / 127.5 - 1`, RGB, NCHW float32;
 * 3. the model's relative inverse depth (`[1, H, W]` or `[1, 1, H, W]`,
 *    near = large);
 * 4. `depth -= min; depth /= max; (depth * 255).clip(0, 255).astype(uint8)`
 *    in float32 (a constant map, where torch would divide by zero, gives
 *    zeros), three identical channels;
 * 5. `cv2.resize(..., INTER_LINEAR)` to the generation size.
 *
 * Near is bright; nothing is inverted.
 *
 * @module
 */

import type { RgbImage } from "../pipeline/types.ts";
import { ToolError } from "../mcp/tool.ts";
import { log } from "../log/mod.ts";
import { checkOutputSize } from "./output_size.ts";
import { resizeArea, resizeLanczos4, resizeLinear, resizeToResolution } from "./resize.ts";
import type { RunModel, Tensor } from "./types.ts";

/** controlnet_aux's default `detect_resolution`. */
export const DEPTH_DETECT_RESOLUTION = 512;

/** A depth model as the pipeline hands it over. */
export interface DepthModel {
  /** Runs the MiDaS/DPT session: the NCHW image under {@link input} in, one relative-depth map out. */
  run: RunModel;
  /** Name of the image input. */
  input: string;
  /** Declared input dims; numbers at positions 2 and 3 fix the spatial size. */
  dims: ReadonlyArray<number | string>;
}

/** Output size of the depth control image. */
export interface DepthOptions {
  /** Width of the control image in pixels. */
  width: number;
  /** Height of the control image in pixels. */
  height: number;
  /**
   * Pixel range the model expects: `signed` = `x / 127.5 - 1` (DPT-Hybrid as
   * controlnet_aux feeds it, the default), `unit` = `x / 255` (MiDaS ONNX
   * exports that take RGB in [0, 1], e.g. axodox's `annotators/depth.onnx`).
   */
  inputRange?: "signed" | "unit";
}

/** The model input image: `resize_image` at 512, or the model's fixed size. */
export function depthInputImage(image: RgbImage, dims: ReadonlyArray<number | string>): RgbImage {
  const h = dims[2];
  const w = dims[3];
  if (typeof h === "number" && typeof w === "number" && h > 0 && w > 0) {
    if (w === image.width && h === image.height) return image;
    // smart_resize rule of controlnet_aux: shrink with AREA, otherwise Lanczos4.
    return w <= image.width && h <= image.height
      ? resizeArea(image, w, h)
      : resizeLanczos4(image, w, h);
  }
  return resizeToResolution(image, DEPTH_DETECT_RESOLUTION);
}

/**
 * HWC uint8 → `[1, 3, H, W]` float32: `x / 127.5 - 1` (`signed`, the default)
 * or `x / 255` (`unit`).
 */
export function depthInputTensor(image: RgbImage, range: "signed" | "unit" = "signed"): Tensor {
  const plane = image.width * image.height;
  const data = new Float32Array(3 * plane);
  for (let i = 0; i < plane; i++) {
    for (let c = 0; c < 3; c++) {
      const x = image.data[i * 3 + c];
      // torch float32: (x / 127.5) rounded, then - 1 rounded.
      data[c * plane + i] = range === "unit"
        ? Math.fround(x / 255)
        : Math.fround(Math.fround(x / 127.5) - 1.0);
    }
  }
  return { data, dims: [1, 3, image.height, image.width] };
}

/**
 * Min-max normalisation to a grey RGB image (step 4 of the module doc):
 * min → 0, max → 255, truncating like `astype(np.uint8)`; a constant map
 * gives zeros. Throws an inference {@link ToolError} on NaN or infinity.
 */
export function depthToImage(depth: Float32Array, width: number, height: number): RgbImage {
  if (depth.length !== width * height) {
    throw new RangeError(`depth map has ${depth.length} values, expected ${width}x${height}`);
  }
  let min = Infinity;
  let max = -Infinity;
  for (const v of depth) {
    if (!Number.isFinite(v)) {
      throw new ToolError("inference", `the depth model produced a non-finite value (${v})`);
    }
    if (v < min) min = v;
    if (v > max) max = v;
  }
  const f = Math.fround;
  const range = f(max - min);
  const data = new Uint8Array(width * height * 3);
  if (range > 0) {
    for (let i = 0; i < depth.length; i++) {
      const d = f(f(depth[i] - min) / range);
      const v = Math.min(255, Math.max(0, f(d * 255)));
      const u = Math.trunc(v);
      data[i * 3] = u;
      data[i * 3 + 1] = u;
      data[i * 3 + 2] = u;
    }
  }
  return { width, height, data };
}

/** Spatial size of a depth output shaped `[1, H, W]` or `[1, 1, H, W]` (or `[H, W]`). */
function depthMapSize(t: Tensor): { width: number; height: number } {
  const d = t.dims;
  const ok = (d.length === 2) || (d.length === 3 && d[0] === 1) ||
    (d.length === 4 && d[0] === 1 && d[1] === 1);
  const height = d[d.length - 2];
  const width = d[d.length - 1];
  if (!ok || !(height > 0 && width > 0) || t.data.length !== width * height) {
    throw new ToolError(
      "inference",
      `the depth model returned shape [${d.join(", ")}]; expected [1, H, W] or [1, 1, H, W]`,
    );
  }
  return { width, height };
}

/**
 * Runs the depth model on `image` and returns the control image at
 * `options.width`×`options.height` (see module doc).
 */
export async function estimateDepth(
  image: RgbImage,
  model: DepthModel,
  options: DepthOptions,
): Promise<RgbImage> {
  checkOutputSize(options.width, options.height);
  const input = depthInputImage(image, model.dims);
  const outputs = await model.run({
    [model.input]: depthInputTensor(input, options.inputRange),
  });
  const first = Object.values(outputs)[0];
  if (!first) throw new ToolError("inference", "the depth model returned no output");
  const { width, height } = depthMapSize(first);
  log("debug", "preprocess", "depth map", {
    input: `${input.width}x${input.height}`,
    output: `${width}x${height}`,
  });
  const grey = depthToImage(first.data, width, height);
  return resizeLinear(grey, options.width, options.height);
}
