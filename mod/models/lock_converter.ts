/**
 * What a converter is to a `[[derived]]` table of the lock: its version (part
 * of the derived files' key), the checks of its inputs and options, its output
 * names and how it writes them. The file converters of `mod/convert` and the
 * SD 1.x set converters (`checkpoint_set.ts`) are both made into one
 * (`lock_converters.ts`).
 *
 * @module
 */

import type { WrittenFile } from "../convert/mod.ts";

/** One converter as a `[[derived]]` table uses it. */
export interface LockConverter {
  /** Part of the derived files' key: a new version rebuilds them. */
  version: number;
  /** What it does, for `models check` and logs. */
  describe: string;
  /** A problem with the inputs (lock paths) it is given, or undefined. */
  inputProblem(inputs: readonly string[]): string | undefined;
  /** A problem with the table's `options`, or undefined (none allowed: `options` is undefined). */
  optionsProblem(options: Record<string, unknown> | undefined): string | undefined;
  /** Its output names for these inputs; undefined: the table lists them (`outputs`). */
  outputs(inputs: readonly string[]): string[] | undefined;
  /** Writes the outputs into `outDir` (empty, existing) from the inputs (absolute paths). */
  run(
    inputs: readonly string[],
    outDir: string,
    options: Record<string, unknown> | undefined,
    signal?: AbortSignal,
  ): Promise<ReadonlyArray<Partial<WrittenFile> & { name: string }>>;
}
