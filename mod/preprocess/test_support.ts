/**
 * Test helpers for mod/preprocess: reading the golden fixtures in
 * `testdata/` (made with the real OpenCV by `testdata/make_golden.py`) and
 * the synthetic pattern image they share with that script.
 *
 * @module
 */

import { gunzipSync } from "node:zlib";
import type { RgbImage } from "../pipeline/types.ts";

const DIR = new URL("./testdata/", import.meta.url);

/** Reads a file of `testdata/` as bytes, gunzipping `.gz` files. */
export function readFixture(name: string): Uint8Array {
  const raw = Deno.readFileSync(new URL(name, DIR));
  return name.endsWith(".gz") ? new Uint8Array(gunzipSync(raw)) : raw;
}

/** Reads and parses a JSON file of `testdata/`. */
export function readJsonFixture<T>(name: string): T {
  return JSON.parse(new TextDecoder().decode(readFixture(name))) as T;
}

/** The deterministic test image of make_golden.py `pattern(w, h)`. */
export function patternImage(width: number, height: number): RgbImage {
  const data = new Uint8Array(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      for (let c = 0; c < 3; c++) {
        data[(y * width + x) * 3 + c] =
          (x * 37 + y * 61 + c * 89 + ((x * y * 7 + c * 13) % 23) * 5) % 256;
      }
    }
  }
  return { width, height, data };
}

/** A black canvas. */
export function blank(width: number, height: number): RgbImage {
  return { width, height, data: new Uint8Array(width * height * 3) };
}

/** The RGB triple at (x, y). */
export function pixel(img: RgbImage, x: number, y: number): [number, number, number] {
  const o = (y * img.width + x) * 3;
  return [img.data[o], img.data[o + 1], img.data[o + 2]];
}

/** Coordinates of all non-black pixels, as "x,y" strings, sorted. */
export function litPixels(img: RgbImage): string[] {
  const out: string[] = [];
  for (let y = 0; y < img.height; y++) {
    for (let x = 0; x < img.width; x++) {
      const o = (y * img.width + x) * 3;
      if (img.data[o] || img.data[o + 1] || img.data[o + 2]) out.push(`${x},${y}`);
    }
  }
  return out.sort();
}

/** Counts differing bytes between two equally sized buffers. */
export function countDiff(a: Uint8Array, b: Uint8Array): number {
  if (a.length !== b.length) throw new RangeError(`lengths differ: ${a.length} vs ${b.length}`);
  let n = 0;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) n++;
  return n;
}
