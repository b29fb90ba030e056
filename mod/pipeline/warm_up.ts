/**
 * The warm-up run: one image of one step at the configured default size,
 * made right after the models are loaded. The engine says it is ready
 * first (so the tools are listed without waiting for it) and runs the
 * warm-up before any request: a client that lists the tools at start and
 * asks for an image later gets it at steady speed, and one that asks at once
 * waits for the rest of the warm-up instead of paying a first run's costs.
 *
 * A fresh ONNX Runtime session's first run at a given input shape has no
 * memory plan yet (`memory_pattern` plans one buffer per run from the first
 * run's shapes): it allocates every intermediate tensor on its own, and with
 * the memory arena off each large one is a fresh mapping whose pages fault in
 * as they are first written. That, not the arithmetic, is what a first run
 * loses (docs/performance.md, "Warm starts"). One step through the text
 * encoder, the UNet (at the batch the configured guidance gives) and the VAE
 * decoder at the default size leaves every one of them planned for the
 * shapes most requests have. Other sizes and the VAE encoder (image to image,
 * upscaling) plan at their first use.
 *
 * @module
 */

import type { Engine } from "./engine.ts";
import type { GenerationRequest } from "./types.ts";

/** What the warm-up needs of an engine. */
export type WarmUpEngine = Pick<Engine, "generate">;

/** The image the warm-up makes: a text-to-image request of the given size, empty prompt, seed 0. */
export function warmUpRequest(size: { width: number; height: number }): GenerationRequest {
  return {
    mode: "text_to_image",
    positive: "",
    negative: "",
    width: size.width,
    height: size.height,
    seed: 0,
  };
}

/** Makes the warm-up image (one denoising step) and returns the milliseconds it took. */
export async function warmUp(
  engine: WarmUpEngine,
  size: { width: number; height: number },
): Promise<number> {
  const t0 = performance.now();
  await engine.generate(warmUpRequest(size), { settings: { steps: 1 } });
  return Math.round(performance.now() - t0);
}
