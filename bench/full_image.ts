/**
 * The image-to-image and upscale scenarios of `deno task bench --full`
 * (run by `full_image_run.ts`), and what a 1024×1024 upscale costs with each
 * preset, from the per-call costs the other scenarios measure: 9 tiles, each
 * one VAE encode, the kept UNet calls and one VAE decode, plus one text
 * encoding for the request.
 *
 * @module
 */

import type { RunReport } from "./full_run.ts";
import type { ImageRunReport } from "./full_image_run.ts";
import { cutTimesteps } from "../mod/pipeline/image_to_image.ts";
import { tileGrid } from "../mod/pipeline/upscale.ts";

/** One scenario as `full.ts` runs it. */
export interface ImageScenario {
  name: string;
  precision: "fp32";
  args: string[];
  /** The runner script. */
  runner: string;
}

/** The runner of these scenarios. */
export const IMAGE_RUNNER = "bench/full_image_run.ts";

/** The image-to-image scenario's name (no commas, so `--only` can name it). */
export const TRANSFORM_SCENARIO = "image-to-image: strength 0.5 (fast preset; fp32; tiny VAE)";
/** The upscale scenario's name. */
export const UPSCALE_SCENARIO =
  "upscale: 512 to 1024x1024 in 9 tiles at strength 0.3 (fast preset; fp32; tiny VAE)";

/** The scenarios, with the common flags (`--size` is not used: the sizes are the tools'). */
export function imageScenarios(): ImageScenario[] {
  return [
    {
      name: TRANSFORM_SCENARIO,
      precision: "fp32",
      args: ["--mode", "transform", "--preset", "fast", "--vae", "tiny", "--strength", "0.5"],
      runner: IMAGE_RUNNER,
    },
    {
      name: UPSCALE_SCENARIO,
      precision: "fp32",
      args: ["--mode", "upscale", "--preset", "fast", "--vae", "tiny", "--strength", "0.3"],
      runner: IMAGE_RUNNER,
    },
  ];
}

function median(xs: readonly number[] | undefined): number {
  const s = [...(xs ?? [])].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length === 0 ? NaN : s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** UNet calls per tile of an upscale at `strength` (PNDM keeps one more than its steps). */
export function keptCalls(steps: number, strength: number, plms: boolean): number {
  const full = Array.from({ length: plms ? steps + 1 : steps }, (_, i) => i);
  return Math.max(1, cutTimesteps(full, steps, strength).timesteps.length);
}

/** The estimate of one preset, ms. */
export interface UpscaleEstimate {
  preset: string;
  tiles: number;
  unetCallsPerTile: number;
  perTileMs: number;
  totalMs: number;
}

/**
 * What a 1024×1024 upscale at `strength` costs with the default preset
 * (PNDM 25 steps, CFG batch 2, full VAE) and the fast one (LCM 4 steps, batch
 * 1, tiny or full VAE), from medians measured in this run: the default
 * scenario's UNet call and full VAE decode, the fast scenario's UNet call
 * and TAESD decode, and the image scenarios' VAE encode and text encoding.
 */
export function upscaleEstimates(
  results: Record<string, RunReport | { error: string }>,
  defaultName: string,
  fastName: string,
  strength = 0.3,
): UpscaleEstimate[] | null {
  const get = (n: string) => {
    const r = results[n];
    return r && !("error" in r) ? r : null;
  };
  const def = get(defaultName);
  const fast = get(fastName);
  const image = (get(UPSCALE_SCENARIO) ?? get(TRANSFORM_SCENARIO)) as ImageRunReport | null;
  if (!def || !fast || !image) return null;
  const encode = median(image.runs.vae_encoder);
  const text = median(image.runs.text_encoder);
  const tiles = tileGrid(1024, 1024).tiles.length;
  const rows: Array<[string, number, number, number]> = [
    // [preset, UNet calls per tile, one UNet call, one decode]
    [
      "default (pndm 25 steps, CFG, full VAE)",
      keptCalls(25, strength, true),
      median(def.runs.unet),
      median(def.runs.vae_decoder),
    ],
    [
      "fast (lcm 4 steps, no CFG, tiny VAE)",
      keptCalls(4, strength, false),
      median(fast.runs.unet),
      median(fast.runs.vae_decoder),
    ],
    [
      "fast with the full VAE decoder",
      keptCalls(4, strength, false),
      median(fast.runs.unet),
      median(def.runs.vae_decoder),
    ],
  ];
  return rows.map(([preset, calls, unet, decode]) => {
    const perTileMs = encode + calls * unet + decode;
    return { preset, tiles, unetCallsPerTile: calls, perTileMs, totalMs: text + tiles * perTileMs };
  });
}
