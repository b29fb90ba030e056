/**
 * Test support for the PIL resamplers: the synthetic inputs of
 * `testdata/make_pil_resize.py` (same integer formulas) and its fixtures,
 * PIL's outputs for every case.
 *
 * @module
 */

import { gunzipSync } from "node:zlib";
import type { RawPixels } from "./sharp.ts";

/** One case of `testdata/pil_resize.json`. */
export interface PilCase {
  /** PIL resampling filter. */
  filter: "lanczos" | "nearest";
  /** PIL image mode: "L" (1 channel) or "RGB" (3 channels). */
  mode: "L" | "RGB";
  /** Which input formula ({@link sourceImage}). */
  kind: string;
  /** Input width and height. */
  src: [number, number];
  /** Target width and height. */
  dst: [number, number];
  /** Sum of the input bytes as the script computed them. */
  inputSum: number;
  /** Where PIL's output lies in the blob. */
  offset: number;
  /** Its length in bytes. */
  length: number;
}

const DIR = new URL("./testdata/", import.meta.url);

/** The cases, the Pillow version that made them, and PIL's output per case. */
export function readPilCases(): {
  pillow: string;
  cases: PilCase[];
  expected(c: PilCase): Uint8Array;
} {
  const meta = JSON.parse(Deno.readTextFileSync(new URL("pil_resize.json", DIR))) as {
    pillow: string;
    cases: PilCase[];
  };
  const blob = new Uint8Array(gunzipSync(Deno.readFileSync(new URL("pil_resize.bin.gz", DIR))));
  return {
    ...meta,
    expected: (c) => blob.subarray(c.offset, c.offset + c.length),
  };
}

/** One 8-bit sample of input `kind` (make_pil_resize.py `value`). */
function value(kind: string, x: number, y: number, c: number): number {
  switch (kind) {
    case "pattern":
      return (x * 37 + y * 61 + c * 89 + ((x * y * 7 + c * 13) % 23) * 5) % 256;
    case "edges":
      if (x % 11 === 10 || y % 7 === 6) return 255;
      return ((Math.floor(x / 3) + Math.floor(y / 5) + c) % 2) * 255;
    case "noise": {
      // Exact in doubles (< 2⁵³); `>>>` takes the low 32 bits, as Python's `>> 13 & 255` sees them.
      const h = x * x * 7919 + x * 1103515245 + y * y * 104729 + y * 12345 + c * 2654435761 +
        x * y * 31337;
      return (h >>> 13) & 255;
    }
    case "checker":
      return (x + y) % 2 ? 192 : 64;
    default:
      throw new Error(`unknown input kind ${kind}`);
  }
}

/** The synthetic input `kind` of `width`×`height` with `channels` channels. */
export function sourceImage(
  kind: string,
  width: number,
  height: number,
  channels: 1 | 3,
): RawPixels {
  const data = new Uint8Array(width * height * channels);
  let i = 0;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      for (let c = 0; c < channels; c++) data[i++] = value(kind, x, y, c);
    }
  }
  return { width, height, channels, data };
}

/** Largest absolute difference between two equally long byte arrays. */
export function maxDiff(a: Uint8Array, b: Uint8Array): number {
  let max = 0;
  for (let i = 0; i < a.length; i++) max = Math.max(max, Math.abs(a[i] - b[i]));
  return max;
}
