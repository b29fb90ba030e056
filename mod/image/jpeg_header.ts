/**
 * Reads a JPEG's dimensions by walking its marker segments to the first
 * frame header (SOF), without decoding. Source: ITU-T T.81 (JPEG) §B.1.1.2
 * (markers, fill bytes 0xFF), §B.1.1.4 (segment length includes itself),
 * Table B.1 (marker codes) and §B.2.2 (frame header: P, Y, X, Nf).
 *
 * SOF markers are 0xC0–0xCF except 0xC4 (DHT), 0xC8 (JPG, reserved) and
 * 0xCC (DAC). Markers without a length: SOI 0xD8, EOI 0xD9, RST0–7
 * 0xD0–0xD7, TEM 0x01.
 *
 * @module
 */

/** The fields of a JPEG frame header. */
export interface JpegHeader {
  width: number;
  height: number;
  /** The SOF marker byte (0xC0 baseline, 0xC2 progressive, …). */
  sofMarker: number;
  /** Sample precision in bits (8 or 12). */
  precision: number;
  /** Number of components: 1 gray, 3 YCbCr/RGB, 4 CMYK/YCCK. */
  components: number;
}

function hex(byte: number): string {
  return "0x" + byte.toString(16).toUpperCase().padStart(2, "0");
}

/** True for the marker bytes that start a frame header. */
function isSof(marker: number): boolean {
  return marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 &&
    marker !== 0xcc;
}

/**
 * Parses the first frame header of a JPEG whose SOI (FF D8) was already
 * recognised. Linear in the bytes before the SOF, never reads past the end.
 * Throws a plain `Error` describing the problem (the caller adds the field
 * name): truncated before the SOF, a byte where a marker should be, scan data
 * before any frame header, zero dimensions.
 */
export function readJpegHeader(bytes: Uint8Array): JpegHeader {
  const n = bytes.length;
  let p = 2;
  for (;;) {
    if (p >= n) {
      throw new Error(`truncated JPEG: it ends at byte ${n} before a frame header (SOF)`);
    }
    if (bytes[p] !== 0xff) {
      throw new Error(
        `corrupt JPEG: expected a marker at offset ${p}, found byte ${hex(bytes[p])}`,
      );
    }
    while (p < n && bytes[p] === 0xff) p++; // fill bytes (§B.1.1.2)
    if (p >= n) {
      throw new Error(`truncated JPEG: it ends at byte ${n} before a frame header (SOF)`);
    }
    const marker = bytes[p++];
    if ((marker >= 0xd0 && marker <= 0xd7) || marker === 0x01) continue;
    if (marker === 0x00 || marker === 0xd8 || marker === 0xd9) {
      throw new Error(
        `corrupt JPEG: unexpected marker FF ${hex(marker).slice(2)} at offset ${
          p - 2
        } before a frame header`,
      );
    }
    if (marker === 0xda) {
      throw new Error(`corrupt JPEG: scan data (SOS) at offset ${p - 2} before any frame header`);
    }
    if (p + 2 > n) {
      throw new Error(`truncated JPEG: it ends inside the segment at offset ${p - 2}`);
    }
    const length = (bytes[p] << 8) | bytes[p + 1];
    if (length < 2) {
      throw new Error(`corrupt JPEG: segment at offset ${p - 2} has length ${length}`);
    }
    if (isSof(marker)) {
      if (p + 8 > n || length < 8) {
        throw new Error(`truncated JPEG: the frame header at offset ${p - 2} is incomplete`);
      }
      const precision = bytes[p + 2];
      const height = (bytes[p + 3] << 8) | bytes[p + 4];
      const width = (bytes[p + 5] << 8) | bytes[p + 6];
      const components = bytes[p + 7];
      if (height === 0) {
        throw new Error(
          `unsupported JPEG: frame height 0 (height defined by a later DNL marker)`,
        );
      }
      if (width === 0) throw new Error(`corrupt JPEG: frame width is 0`);
      return { width, height, sofMarker: marker, precision, components };
    }
    p += length;
  }
}
