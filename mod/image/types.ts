/**
 * Types shared by the image input path: which tool field an image came from,
 * which formats are accepted and what a validated, not yet decoded image is.
 *
 * @module
 */

/** The tool fields that carry images; every error message names one. */
export type ImageField = "input_image" | "mask_image";

/** The two accepted input formats (contract §2: "PNG and JPEG only"). */
export type ImageFormat = "png" | "jpeg";

/**
 * An input image that passed every check that needs no pixel decoding:
 * canonical base64, a supported data URI, PNG/JPEG magic bytes, a readable
 * header and the pixel limit. `width` and `height` are the stored (header)
 * dimensions, before EXIF orientation.
 */
export interface DecodedImage {
  /** The field it came from, for error messages of later stages. */
  field: ImageField;
  /** The format detected from the magic bytes. */
  format: ImageFormat;
  /** The encoded file bytes (base64-decoded). */
  bytes: Uint8Array;
  /** Width from the PNG IHDR / JPEG SOF header. */
  width: number;
  /** Height from the PNG IHDR / JPEG SOF header. */
  height: number;
}
