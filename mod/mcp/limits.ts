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
