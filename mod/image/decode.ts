/**
 * The input-image path of the image tools: string → validated bytes
 * ({@link decodeImageInput}) → pixels at the generation size
 * ({@link toRgbImage} for `input_image`, {@link toMask} for `mask_image`).
 * Contract §2 / the MCP tools contract §2.3. Decoding and resizing run in a
 * process of their own, stopped at {@link DECODE_TIMEOUT_SECONDS}
 * (`decode_process.ts`).
 *
 * @module
 */

import { ToolError } from "../mcp/tool.ts";
import type { Mask, RgbImage } from "../pipeline/types.ts";
import type { Size } from "./aspect.ts";
import { decodeBase64 } from "./base64.ts";
import { splitImageString } from "./data_uri.ts";
import { decodeIsolated, DecodeProcessFailure } from "./decode_process.ts";
import { DECODE_TIMEOUT_SECONDS } from "./limits.ts";
import { FORMAT_NAMES, inspectImage } from "./sniff.ts";
import { checkImageStructure } from "./structure.ts";
import type { DecodedImage, ImageField } from "./types.ts";

/**
 * Validates an image tool input without decoding pixels: data-URI form,
 * canonical base64 and its length (≤ 36,000,000 characters of payload,
 * checked before decoding), PNG/JPEG magic bytes, declared vs detected type,
 * header dimensions and the 40,000,000-pixel limit, and the structural
 * limits of `structure.ts` (at most 100 JPEG scans; PNG text chunks dropped,
 * at most 1 MB of other metadata chunks). Rejects with
 * `ToolError("image")` whose message names `field`.
 */
export function decodeImageInput(field: ImageField, value: string): Promise<DecodedImage> {
  try {
    if (typeof value !== "string") {
      throw new ToolError("image", `${field}: expected a string, got ${typeof value}`);
    }
    const { declared, declaredType, payload } = splitImageString(field, value);
    const bytes = decodeBase64(field, payload);
    const { format, width, height } = inspectImage(field, bytes, declared, declaredType);
    const checked = checkImageStructure(field, format, bytes);
    return Promise.resolve({ field, format, bytes: checked, width, height });
  } catch (error) {
    return Promise.reject(error);
  }
}

/** Every decode (with its resize) runs in its own process, killed at the deadline. */
const DECODE_OPTIONS = { timeoutMs: DECODE_TIMEOUT_SECONDS * 1000 };

function checkSize(width: number, height: number): void {
  if (!Number.isInteger(width) || !Number.isInteger(height) || width < 1 || height < 1) {
    throw new RangeError(`target size must be positive integers, got ${width}×${height}`);
  }
}

/** Turns a sharp/libvips failure into an image-class tool error. */
function decodeFailure(decoded: DecodedImage, error: unknown): ToolError {
  const detail = (error instanceof Error ? error.message : String(error))
    .split("\n").map((line) => line.trim()).filter((line) => line.length > 0).join("; ");
  const what = `${decoded.field}: the ${
    FORMAT_NAMES[decoded.format]
  } image (${decoded.width}×${decoded.height})`;
  if (error instanceof DecodeProcessFailure && !error.started) {
    return new ToolError(
      "configuration",
      `${decoded.field}: input images cannot be decoded on this server: ${detail}`,
    );
  }
  if (/^timeout/.test(detail)) {
    return new ToolError(
      "image",
      `${what} took longer than ${DECODE_TIMEOUT_SECONDS} s to decode (${detail}); send a smaller or simpler file`,
    );
  }
  return new ToolError(
    "image",
    `${what} could not be decoded; it is corrupt or truncated (${detail})` +
      (decoded.format === "jpeg" ? "; re-saving it with an image editor usually fixes this" : ""),
  );
}

/**
 * Decodes `decoded` to 8-bit sRGB RGB at exactly `width`×`height`:
 * EXIF orientation applied; gray, gray+alpha, palette, 16-bit, RGBA and
 * CMYK converted to sRGB; alpha flattened onto white, because transparent
 * areas of user images are usually background, and white is how viewers
 * show them; then stretched (aspect ratio not kept, as the contract says
 * "resized to the generation size") with PIL's Lanczos (`lanczos.ts`).
 * Rejects with `ToolError("image")` for corrupt or truncated data.
 */
export async function toRgbImage(
  decoded: DecodedImage,
  width: number,
  height: number,
): Promise<RgbImage> {
  checkSize(width, height);
  return await toRgbImageClosest(decoded, [{ width, height }]);
}

/**
 * {@link toRgbImage} at the one of `sizes` whose aspect ratio is closest to
 * the decoded image's after EXIF orientation (`closestAspect`, in the decode process), e.g.
 * the output size that keeps an input's shape.
 */
export async function toRgbImageClosest(
  decoded: DecodedImage,
  sizes: ReadonlyArray<Size>,
): Promise<RgbImage> {
  for (const s of sizes) checkSize(s.width, s.height);
  let raw;
  try {
    raw = await decodeIsolated({ op: "rgb", sizes: [...sizes] }, decoded.bytes, DECODE_OPTIONS);
  } catch (error) {
    throw decodeFailure(decoded, error);
  }
  return { width: raw.width, height: raw.height, data: raw.data };
}

/**
 * Decodes `decoded` to a binary mask at exactly `width`×`height`: EXIF
 * orientation applied, alpha flattened onto black (a mask drawn as white
 * strokes on a transparent layer means "regenerate the strokes"),
 * converted to grayscale luminance, stretched with PIL's nearest-neighbour
 * sampling (`nearest.ts`), then thresholded: value > 127 (luminance above 50%) → 1 =
 * regenerate, else 0 = keep.
 * Rejects with `ToolError("image")` for corrupt or truncated data.
 */
export async function toMask(
  decoded: DecodedImage,
  width: number,
  height: number,
): Promise<Mask> {
  checkSize(width, height);
  let raw;
  try {
    raw = await decodeIsolated(
      { op: "gray", sizes: [{ width, height }] },
      decoded.bytes,
      DECODE_OPTIONS,
    );
  } catch (error) {
    throw decodeFailure(decoded, error);
  }
  const data = raw.data;
  for (let i = 0; i < data.length; i++) data[i] = data[i] > 127 ? 1 : 0;
  return { width: raw.width, height: raw.height, data };
}
