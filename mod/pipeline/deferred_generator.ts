/**
 * A {@link Generator} whose engine is still starting: lets the transport
 * answer `initialize` while the model check and the Worker's sessions load
 * (seconds to minutes at full size, docs/performance.md), and makes every call wait for
 * them.
 *
 * @module
 */

import type { GenerateOptions, GenerationRequest, GenerationResult, Generator } from "./types.ts";

/** A generator that is usable once {@link DeferredGenerator.ready} settles. */
export interface DeferredGenerator extends Generator {
  /** Resolves when the engine is up; rejects with the start-up error. */
  readonly ready: Promise<void>;
}

/**
 * Wraps a generator that is still being created. `generate` waits for it
 * (and rejects with the start-up error if it failed); `close` waits for it
 * and closes it, or does nothing when start-up failed.
 */
export function deferredGenerator(starting: Promise<Generator>): DeferredGenerator {
  const ready = starting.then(() => undefined);
  // Nobody may be waiting yet; the failure is reported by whoever awaits `ready`.
  ready.catch(() => {});
  return {
    ready,
    async generate(
      request: GenerationRequest,
      options?: GenerateOptions,
    ): Promise<GenerationResult> {
      return await (await starting).generate(request, options);
    },
    async close(): Promise<void> {
      let generator: Generator;
      try {
        generator = await starting;
      } catch {
        return;
      }
      await generator.close();
    },
  };
}
