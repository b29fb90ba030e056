/**
 * The only module that imports `sharp` (libvips). Everything here works on
 * raw interleaved 8-bit pixels; validation and error wording live in
 * `decode.ts`, `resize.ts` and `png.ts`.
 *
 * Every decode passes `failOn`, `limitInputPixels` and a timeout:
 * - JPEGs decode with `failOn: "warning"`: libjpeg reports a frame header
 *   (SOF) that disagrees with the scan data, or corrupt entropy data, only
 *   as a warning and fills the rest with grey; such an image would silently
 *   guide a generation. The price: a camera JPEG with "extraneous bytes
 *   before marker" is refused too (the message asks to re-save it).
 * - PNGs decode with `failOn: "error"`: decode errors and truncated data
 *   abort (higher levels include lower ones, sharp docs "failOn") instead of
 *   returning a partly grey image;
 * - `limitInputPixels` is a second guard behind the header check in
 *   `sniff.ts`;
 * - `timeout` ({@link DECODE_TIMEOUT_SECONDS}) stops a decode that runs
 *   too long.
 *
 * The libvips operation cache is disabled: a server decoding arbitrary user
 * images gains nothing from caching them and should not hold their memory.
 *
 * @module
 */

import sharp, { type Sharp } from "sharp";
import { DECODE_TIMEOUT_SECONDS, MAX_PIXELS } from "./limits.ts";

sharp.cache(false);

/** The sharp library itself, for tests in this folder that build input files. */
export const sharpLib: typeof sharp = sharp;

/** Resampling kernels offered by {@link resizeRaw} (sharp / libvips names). */
export type ResizeKernel = "lanczos3" | "nearest" | "linear" | "cubic";

/** Raw interleaved 8-bit pixels. */
export interface RawPixels {
  width: number;
  height: number;
  channels: number;
  data: Uint8Array;
}

/** An optional target size; the image is stretched to it (fit "fill"). */
export interface TargetSize {
  width: number;
  height: number;
}

const PNG_INPUT = { failOn: "error", limitInputPixels: MAX_PIXELS } as const;
const JPEG_INPUT = { failOn: "warning", limitInputPixels: MAX_PIXELS } as const;

/** A decoding pipeline for PNG/JPEG `bytes` with the options of the module documentation. */
function input(bytes: Uint8Array): Sharp {
  const jpeg = bytes[0] === 0xff && bytes[1] === 0xd8;
  return sharp(bytes, jpeg ? JPEG_INPUT : PNG_INPUT).timeout({ seconds: DECODE_TIMEOUT_SECONDS });
}
const WHITE = { r: 255, g: 255, b: 255 };
const BLACK = { r: 0, g: 0, b: 0 };

/**
 * A `Uint8Array` that owns its whole buffer: sharp hands back Node Buffers,
 * which may be views; a view would transfer (and detach) unrelated memory
 * when posted to a Worker.
 */
function own(buffer: Uint8Array): Uint8Array {
  if (buffer.byteOffset === 0 && buffer.byteLength === buffer.buffer.byteLength) {
    return new Uint8Array(buffer.buffer, 0, buffer.byteLength);
  }
  return new Uint8Array(buffer);
}

async function collect(pipeline: Sharp, channels: number): Promise<RawPixels> {
  const { data, info } = await pipeline.raw({ depth: "uchar" }).toBuffer({
    resolveWithObject: true,
  });
  if (info.channels !== channels || data.length !== info.width * info.height * channels) {
    throw new Error(
      `sharp returned ${info.width}×${info.height}×${info.channels} (${data.length} bytes), expected ${channels} channels`,
    );
  }
  return { width: info.width, height: info.height, channels, data: own(data) };
}

/**
 * Decodes PNG/JPEG `bytes` to 8-bit sRGB RGB: EXIF orientation applied, any
 * alpha flattened onto white, then stretched to `size` with `kernel` (no
 * resize when `size` is omitted). Rejects with sharp's error on corrupt,
 * truncated or oversized input.
 */
export function decodeRgb(
  bytes: Uint8Array,
  size?: TargetSize,
  kernel: ResizeKernel = "lanczos3",
): Promise<RawPixels> {
  // sharp applies flatten before resize in its fixed pipeline order, so
  // transparent pixels cannot bleed dark fringes into the resize.
  let pipeline = input(bytes).autoOrient().flatten({ background: WHITE });
  if (size) pipeline = pipeline.resize(size.width, size.height, { fit: "fill", kernel });
  return collect(pipeline.toColourspace("srgb").removeAlpha(), 3);
}

/**
 * Decodes PNG/JPEG `bytes` to one 8-bit luminance channel: EXIF orientation
 * applied, alpha flattened onto black, then stretched to `size` with
 * nearest-neighbour sampling (no resize when `size` is omitted).
 */
export function decodeGray(bytes: Uint8Array, size?: TargetSize): Promise<RawPixels> {
  let pipeline = input(bytes).autoOrient().flatten({ background: BLACK });
  if (size) {
    pipeline = pipeline.resize(size.width, size.height, { fit: "fill", kernel: "nearest" });
  }
  return collect(pipeline.greyscale().removeAlpha(), 1);
}

/** Stretches raw pixels to `width`×`height` with `kernel`. */
export function resizeRaw(
  image: RawPixels,
  width: number,
  height: number,
  kernel: ResizeKernel,
): Promise<RawPixels> {
  const channels = image.channels as 1 | 2 | 3 | 4;
  const pipeline = sharp(image.data, {
    raw: { width: image.width, height: image.height, channels },
  }).resize(width, height, { fit: "fill", kernel });
  return collect(pipeline, channels);
}

/** Encodes raw pixels (1–4 channels) as a PNG without metadata. */
export async function encodeRawPng(image: RawPixels): Promise<Uint8Array> {
  const channels = image.channels as 1 | 2 | 3 | 4;
  const buffer = await sharp(image.data, {
    raw: { width: image.width, height: image.height, channels },
  }).png().toBuffer();
  return own(buffer);
}

/**
 * Encodes raw 8-bit RGB pixels as a baseline JPEG at `quality` (1–100,
 * libjpeg's scale) with 4:2:0 chroma subsampling and no metadata.
 */
export async function encodeRawJpeg(image: RawPixels, quality: number): Promise<Uint8Array> {
  const buffer = await sharp(image.data, {
    raw: { width: image.width, height: image.height, channels: 3 },
  }).jpeg({ quality, chromaSubsampling: "4:2:0" }).toBuffer();
  return own(buffer);
}
