/**
 * Argument checks shared by the schedulers, so every one fails the same way
 * with the values that were wrong.
 *
 * @module
 */

import type { TorchGenerator } from "../random/mod.ts";

/** Throws unless all arrays have the length of the first. */
export function checkSameLength(what: string, arrays: Record<string, Float32Array>): void {
  const entries = Object.entries(arrays);
  const [firstName, first] = entries[0];
  for (const [name, arr] of entries.slice(1)) {
    if (arr.length !== first.length) {
      throw new RangeError(
        `${what}: ${name} has ${arr.length} values but ${firstName} has ${first.length}`,
      );
    }
  }
}

/** Throws when a stochastic step has no generator to draw its noise from. */
export function requireGenerator(
  scheduler: string,
  generator: TorchGenerator | undefined,
): TorchGenerator {
  if (generator === undefined) {
    throw new Error(
      `${scheduler}.step draws noise and needs a TorchGenerator, but none was given`,
    );
  }
  return generator;
}

/** Throws when `step`/`scaleModelInput` runs before `setTimesteps`. */
export function requireTimesteps(scheduler: string, timesteps: number[]): void {
  if (timesteps.length === 0) {
    throw new Error(`${scheduler}: call setTimesteps before scaleModelInput or step`);
  }
}

/** Throws when `step` runs again after the last of `count` steps (`index` is the next step). */
export function requireStepLeft(scheduler: string, index: number, count: number): void {
  if (index >= count) {
    throw new Error(`${scheduler}.step called after the last of ${count} steps`);
  }
}
