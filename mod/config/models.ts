/**
 * `[models] base = "auto"`: which SD 1.5 set the execution provider runs best
 * and which folder under the models root holds it.
 *
 * @module
 */

import { join } from "node:path";

/**
 * The SD 1.5 sets `[models] base = "auto"` picks from. On the CPU provider an
 * fp32 set, where fp32 runs 1.5× (idle machine) to 7× (contended) faster per
 * UNet call than fp16 and peaks at 1.35× instead of 3.5× its files (ONNX
 * Runtime's CPU provider has few float16 kernels; docs/performance.md): the
 * pinned fp32 export (runwayml/stable-diffusion-v1-5, whose host is gone)
 * when it is in place, else the fp32 set that `deno task models` derives
 * from the downloaded fp16 one (`models.lock` `[[derived]]`). GPU providers:
 * the fp16 set (half the download and memory).
 */
export const AUTO_BASE = {
  /** The pinned fp32 export's folder under the models root. */
  fp32: "sd15-fp32",
  /** The folder of the fp32 set derived from the fp16 one. */
  fp32Derived: "sd15-fp32-derived",
  /** The fp16 set's folder under the models root. */
  fp16: "sd15",
  /** The file whose presence says the pinned fp32 export is in place (its largest). */
  fp32Marker: "sd15-fp32/unet/weights.pb",
} as const;

/**
 * Which set `[models] base = "auto"` picks by {@link AUTO_BASE} (asking
 * `exists` once about the fp32 export's marker); null for a named folder.
 */
export function autoBase(
  base: string,
  provider: "cpu" | "cuda" | "webgpu",
  root: string,
  exists: (path: string) => boolean,
): "fp32" | "fp32-derived" | "fp16" | null {
  if (base !== "auto") return null;
  if (provider !== "cpu") return "fp16";
  return exists(join(root, ...AUTO_BASE.fp32Marker.split("/"))) ? "fp32" : "fp32-derived";
}

/** The folder under the models root of each set {@link autoBase} picks. */
export const AUTO_FOLDER = {
  "fp32": AUTO_BASE.fp32,
  "fp32-derived": AUTO_BASE.fp32Derived,
  "fp16": AUTO_BASE.fp16,
};
