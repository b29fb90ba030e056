/**
 * Image input and output: base64 / data-URI parsing, PNG/JPEG sniffing and
 * header limits, decoding with sharp to RGB images and binary masks at the
 * generation size, RGB resizing, and PNG encoding with tEXt metadata.
 * `sharp` itself is imported only in `sharp.ts`.
 *
 * @module
 */

export type { DecodedImage, ImageField, ImageFormat } from "./types.ts";
export { MAX_BASE64_LENGTH, MAX_PIXELS } from "./limits.ts";
export {
  closestAspect,
  decodeImageInput,
  toMask,
  toRgbImage,
  toRgbImageClosest,
} from "./decode.ts";
export { type ResizeKernel, resizeRgb } from "./resize.ts";
export { encodePng, readPngText } from "./png.ts";
