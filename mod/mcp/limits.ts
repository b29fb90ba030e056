/**
 * Message size limits shared by both transports.
 *
 * @module
 */

/** Largest accepted base64 image string (contract §2). */
export const MAX_IMAGE_BASE64_LENGTH = 36_000_000;

/**
 * Largest accepted request body / stdio line in bytes: two maximal images
 * (`inpaint_image` carries `input_image` and `mask_image`) plus 1 MiB for the
 * JSON envelope and two 10,000-character prompts, even fully `\u`-escaped
 * (2 × 10,000 × 12 bytes ≈ 240 kB). The SDK defaults (4 MiB over HTTP, 10 MiB
 * over stdio) would refuse a valid request before validation could explain
 * anything.
 */
export const MAX_REQUEST_BYTES: number = 2 * MAX_IMAGE_BASE64_LENGTH + 1024 * 1024;

/**
 * Largest message that is not a `tools/call` of an image-input tool. Only
 * `generate_guided_image`, `inpaint_image`, `transform_image` and
 * `upscale_image` carry images; everything else
 * (a 10,000-character prompt fully `\u`-escaped included) fits in 1 MiB, so
 * a bigger `ping` or `tools/list` is refused before it is parsed further.
 */
export const MAX_SMALL_MESSAGE_BYTES = 1024 * 1024;

/** The tools whose calls may use up to {@link MAX_REQUEST_BYTES}. */
export const IMAGE_INPUT_TOOLS: readonly string[] = [
  "generate_guided_image",
  "inpaint_image",
  "transform_image",
  "upscale_image",
];
