/**
 * Test support for the JPEG structure limits: hand-built progressive JPEGs
 * whose scan count, size and padding a test chooses (ITU-T T.81 Annex B
 * syntax, Annex G progressive coding).
 *
 * {@link scanFloodJpeg} writes a grayscale progressive JPEG (SOF2) whose
 * blocks are all mid-grey: one DC first scan (Al = 0, every difference 0),
 * then `acScans` AC first scans over coefficients 1–63 (Al = 0), each coded
 * as end-of-band runs (EOB14, 32,767 blocks a symbol), so a scan is a dozen
 * bytes. Repeating a first scan with Al = 0 is a consistent progression
 * (libjpeg's `start_pass_phuff_decoder` expects Ah = 0 again), so libjpeg
 * decodes every one of them, and each walks the whole coefficient buffer:
 * decode time grows with scans × blocks while the file stays small.
 *
 * {@link paddedScanFlood} builds the file of the finding that hid scans from
 * the count: a real progressive JPEG from sharp, one 0x00 byte before its
 * first SOS, and its smallest scan repeated to 8,000 scans (19.8 MB).
 *
 * @module
 */

import { sharpLib as sharp } from "./sharp.ts";
import { concatBytes } from "../bytes/mod.ts";

/** Options of {@link scanFloodJpeg}. */
export interface ScanFloodOptions {
  /** Width and height in pixels (a multiple of 8). */
  size: number;
  /** AC first scans after the DC scan. */
  acScans: number;
  /** Bytes inserted right before the first SOS (e.g. `[0x00]`: "extraneous bytes" to libjpeg). */
  beforeFirstScan?: number[];
  /** Fill bytes (0xFF) written before every SOS marker, which T.81 §B.1.1.2 allows. */
  fillBeforeEachScan?: number;
}

class Bytes {
  readonly parts: number[] = [];
  push(...bytes: number[]): void {
    for (const b of bytes) this.parts.push(b);
  }
  segment(marker: number, body: number[]): void {
    const length = body.length + 2;
    this.push(0xff, marker, length >> 8, length & 0xff, ...body);
  }
}

/** Entropy-coded bits, MSB first, with 0xFF stuffed and the last byte padded with 1s. */
function entropy(write: (bit: (value: number, bits: number) => void) => void): number[] {
  const out: number[] = [];
  let acc = 0;
  let n = 0;
  const bit = (value: number, bits: number) => {
    for (let i = bits - 1; i >= 0; i--) {
      acc = (acc << 1) | ((value >> i) & 1);
      if (++n === 8) {
        out.push(acc);
        if (acc === 0xff) out.push(0x00);
        acc = 0;
        n = 0;
      }
    }
  };
  write(bit);
  if (n > 0) bit(0xff, 8 - n);
  return out;
}

/** Builds the JPEG of the module documentation. */
export function scanFloodJpeg(options: ScanFloodOptions): Uint8Array {
  const { size, acScans } = options;
  if (size % 8 !== 0 || size < 8 || size > 65535) throw new Error(`size ${size}`);
  const blocks = (size / 8) ** 2;
  const out = new Bytes();
  out.push(0xff, 0xd8);
  // DQT: table 0, all ones (values do not matter for all-zero coefficients).
  out.segment(0xdb, [0x00, ...new Array(64).fill(1)]);
  // SOF2: 8-bit, size × size, one component (id 1, 1×1 sampling, table 0).
  out.segment(0xc2, [8, size >> 8, size & 0xff, size >> 8, size & 0xff, 1, 1, 0x11, 0]);
  // DHT (BITS: codes per length 1..16, then the symbols): DC table 0 with one symbol
  // (category 0, code "0"); AC table 0 with EOB0..EOB14 (0x00, 0x10, …, 0xE0), 4-bit
  // codes 0000..1110 in that order.
  const dcBits = [1, ...new Array(15).fill(0)];
  const acBits = [0, 0, 0, 15, ...new Array(12).fill(0)];
  const eobSymbols = Array.from({ length: 15 }, (_, n) => n << 4);
  out.segment(0xc4, [0x00, ...dcBits, 0x00, 0x10, ...acBits, ...eobSymbols]);
  out.push(...(options.beforeFirstScan ?? []));
  const fill = () => out.push(...new Array(options.fillBeforeEachScan ?? 0).fill(0xff));
  // DC first scan: Ss = Se = 0, Ah = Al = 0; every block's difference is category 0.
  fill();
  out.segment(0xda, [1, 1, 0x00, 0, 0, 0x00]);
  out.push(...entropy((bit) => {
    for (let i = 0; i < blocks; i++) bit(0, 1);
  }));
  // AC first scans: Ss = 1, Se = 63, Ah = Al = 0; every block in end-of-band runs, a
  // run of r blocks coded EOBn (n = floor(log2 r), code n) and then r - 2^n in n bits.
  const ac = entropy((bit) => {
    for (let left = blocks; left > 0;) {
      const run = Math.min(left, 32767);
      const n = 31 - Math.clz32(run);
      bit(n, 4);
      bit(run - (1 << n), n);
      left -= run;
    }
  });
  for (let s = 0; s < acScans; s++) {
    fill();
    out.segment(0xda, [1, 1, 0x00, 1, 63, 0x00]);
    out.push(...ac);
  }
  out.push(0xff, 0xd9);
  return new Uint8Array(out.parts);
}

/** What {@link paddedScanFlood} built. */
export interface PaddedScanFlood {
  /** The file: one 0x00 before the first SOS, 8,000 scans. */
  padded: Uint8Array;
  /** The same scans without the 0x00 byte. */
  unpadded: Uint8Array;
  /** The offset of the 0x00 byte (where the first SOS was). */
  padAt: number;
}

/** Builds the file of the module documentation (about 20 MB; takes a fraction of a second). */
export async function paddedScanFlood(scans = 8000): Promise<PaddedScanFlood> {
  // 896×896 noise: its DC refinement scan, the smallest of libjpeg's 10, is about 2.4 KB.
  const size = 896;
  const noise = new Uint8Array(size * size * 3).map((_, i) =>
    (Math.imul(i, 2654435761) >>> 24) & 255
  );
  const jpeg = new Uint8Array(
    await sharp(noise, { raw: { width: size, height: size, channels: 3 } })
      .jpeg({ progressive: true, quality: 90 }).toBuffer(),
  );
  // sharp's entropy-coded data never holds FF DA, so these are the SOS markers.
  const starts: number[] = [];
  for (let i = 0; i + 1 < jpeg.length; i++) {
    if (jpeg[i] === 0xff && jpeg[i + 1] === 0xda) starts.push(i);
  }
  const eoi = jpeg.length - 2;
  const ends = [...starts.slice(1), eoi];
  const smallest = starts.reduce(
    (best, _, i) => ends[i] - starts[i] < ends[best] - starts[best] ? i : best,
    0,
  );
  const repeated = new Array(scans - starts.length).fill(
    jpeg.subarray(starts[smallest], ends[smallest]),
  );
  const tail = jpeg.subarray(eoi);
  return {
    padded: concatBytes([
      jpeg.subarray(0, starts[0]),
      new Uint8Array([0x00]),
      jpeg.subarray(starts[0], eoi),
      ...repeated,
      tail,
    ]),
    unpadded: concatBytes([jpeg.subarray(0, eoi), ...repeated, tail]),
    padAt: starts[0],
  };
}
