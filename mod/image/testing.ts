/**
 * Images for tests that need pictures of a known kind: smooth gradients
 * (which compress like photographs) under a chosen amount of pixel noise
 * (pure noise does not compress at all); the image tests' shared checks.
 *
 * @module
 */

import { ok, strictEqual, throws } from "node:assert";
import { ToolError } from "../mcp/tool.ts";
import type { RgbImage } from "../pipeline/types.ts";

/** Deterministic pseudo-random bytes (mulberry32). */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) & 255;
  };
}

/** Smooth colour gradients under pixel noise of `noise` levels: photo-like to pure noise. */
export function texturedImage(width: number, height: number, noise: number, seed = 1): RgbImage {
  const next = random(seed);
  const data = new Uint8Array(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const at = (y * width + x) * 3;
      const base = [x * 255 / width, y * 255 / height, (x + y) * 127 / (width + height)];
      for (let c = 0; c < 3; c++) {
        const n = ((next() / 255) - 0.5) * noise;
        data[at + c] = Math.max(0, Math.min(255, Math.round(base[c] + n)));
      }
    }
  }
  return { width, height, data };
}

/** Asserts `fn` throws an image-class ToolError whose message contains every part. */
export function throwsImage(fn: () => unknown, ...parts: string[]): void {
  throws(fn, (error: unknown) => {
    ok(error instanceof ToolError, `expected ToolError, got ${error}`);
    strictEqual(error.category, "image");
    for (const part of parts) {
      ok(error.message.includes(part), `message ${JSON.stringify(error.message)} lacks ${part}`);
    }
    return true;
  });
}

/** Table-less bitwise CRC-32 (reflected poly 0xEDB88320), independent of crc32.ts. */
export function bitwiseCrc32(bytes: Uint8Array): number {
  let crc = 0xffffffff;
  for (const byte of bytes) {
    crc ^= byte;
    for (let k = 0; k < 8; k++) crc = (crc >>> 1) ^ (0xedb88320 & -(crc & 1));
  }
  return (crc ^ 0xffffffff) >>> 0;
}
