/**
 * Reads a PNG's dimensions from its IHDR chunk without decoding pixels.
 * Layout (PNG specification, W3C 3rd ed., §5.2 signature, §5.3 chunk layout,
 * §11.2.1 IHDR): 8-byte signature, then the IHDR chunk — length (4, = 13),
 * type "IHDR", width (4), height (4), bit depth, colour type, compression,
 * filter, interlace (1 each), CRC-32 over type + data (4).
 *
 * @module
 */

import { crc32 } from "./crc32.ts";

/** The 8-byte PNG signature (§5.2). */
export const PNG_SIGNATURE: Uint8Array = Uint8Array.of(
  0x89,
  0x50,
  0x4e,
  0x47,
  0x0d,
  0x0a,
  0x1a,
  0x0a,
);

/** The fields of a PNG IHDR chunk. */
export interface PngHeader {
  width: number;
  height: number;
  /** 1, 2, 4, 8 or 16. */
  bitDepth: number;
  /** 0 gray, 2 RGB, 3 palette, 4 gray+alpha, 6 RGBA. */
  colourType: number;
  /** 0 none, 1 Adam7. */
  interlace: number;
}

/** Bytes up to the end of the IHDR CRC. */
const IHDR_END = 33;

/** Allowed bit depths per colour type (§11.2.1 Table 11.1). */
const DEPTHS: Readonly<Record<number, readonly number[]>> = {
  0: [1, 2, 4, 8, 16],
  2: [8, 16],
  3: [1, 2, 4, 8],
  4: [8, 16],
  6: [8, 16],
};

/** Big-endian unsigned 32-bit read. */
function u32(bytes: Uint8Array, at: number): number {
  return ((bytes[at] << 24) | (bytes[at + 1] << 16) | (bytes[at + 2] << 8) | bytes[at + 3]) >>> 0;
}

/**
 * Parses the IHDR of a PNG whose signature was already recognised. Throws a
 * plain `Error` with a description of the problem (the caller adds the field
 * name): too short, IHDR missing or of wrong length, bad CRC, zero or
 * over-2^31 dimensions, invalid bit depth / colour type.
 */
export function readPngHeader(bytes: Uint8Array): PngHeader {
  if (bytes.length < IHDR_END) {
    throw new Error(
      `truncated PNG: ${bytes.length} bytes, the signature and IHDR header need ${IHDR_END}`,
    );
  }
  const length = u32(bytes, 8);
  const type = String.fromCharCode(bytes[12], bytes[13], bytes[14], bytes[15]);
  if (type !== "IHDR") {
    throw new Error(`corrupt PNG: the first chunk is ${JSON.stringify(type)}, not IHDR`);
  }
  if (length !== 13) throw new Error(`corrupt PNG: IHDR length is ${length}, not 13`);
  const stored = u32(bytes, 29);
  const computed = crc32(bytes.subarray(12, 29));
  if (stored !== computed) {
    throw new Error(
      `corrupt PNG: IHDR CRC is 0x${stored.toString(16).padStart(8, "0")} but its data gives 0x${
        computed.toString(16).padStart(8, "0")
      }`,
    );
  }
  const width = u32(bytes, 16);
  const height = u32(bytes, 20);
  const bitDepth = bytes[24];
  const colourType = bytes[25];
  const interlace = bytes[28];
  // §11.2.1: dimensions are 1 .. 2^31 - 1.
  if (width === 0 || height === 0 || width > 0x7fffffff || height > 0x7fffffff) {
    throw new Error(`corrupt PNG: IHDR dimensions ${width}×${height} are out of range`);
  }
  const depths = DEPTHS[colourType];
  if (depths === undefined || !depths.includes(bitDepth)) {
    throw new Error(
      `corrupt PNG: IHDR bit depth ${bitDepth} with colour type ${colourType} is not valid`,
    );
  }
  if (bytes[26] !== 0 || bytes[27] !== 0 || interlace > 1) {
    throw new Error(
      `corrupt PNG: IHDR compression/filter/interlace ${bytes[26]}/${
        bytes[27]
      }/${interlace} are not valid`,
    );
  }
  return { width, height, bitDepth, colourType, interlace };
}
