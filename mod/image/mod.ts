/**
 * Image input and output: base64 / data-URI parsing, PNG/JPEG sniffing and
 * header limits, decoding with sharp to RGB images and binary masks at the
 * generation size, RGB resizing, and PNG encoding with tEXt metadata.
 * `sharp` itself is imported only in `sharp.ts`.
 *
 * @module
 */

export type { DecodedImage, ImageField, ImageFormat } from "./types.ts";
export {
  MAX_BASE64_LENGTH,
  MAX_CONCURRENT_DECODES,
  MAX_CONCURRENT_DECODES_PER_KEY,
  MAX_PIXELS,
} from "./limits.ts";
export { closestAspect, type Size } from "./aspect.ts";
export { decodeImageInput, toMask, toRgbImage, toRgbImageClosest } from "./decode.ts";
export { DECODE_CHILD_FLAG, runDecodeChild } from "./decode_child.ts";
export { holdSpareDecoders } from "./decode_process.ts";
export { type ResizeKernel, resizeRgb } from "./resize.ts";
export { encodePng, readPngText } from "./png.ts";
export {
  MIN_PREVIEW_SIDE,
  pngDimensions,
  type Preview,
  PREVIEW_QUALITIES,
  previewWithin,
} from "./preview.ts";
