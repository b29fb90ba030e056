/**
 * Every converter a `[[derived]]` table may name: the file converters of
 * `mod/convert` (`fp32`, `taesd`, `copy`: fixed output names, no options)
 * and the SD 1.x set converters `models add` records
 * (`sd15-checkpoint`: a single-file checkpoint or a diffusers folder into the
 * ONNX set the server runs; `sd15-vae`: a standalone VAE into a VAE set).
 * A set converter takes `options` (precision, EMA, components) and its
 * output names depend on what it wrote, so its table lists them in
 * `outputs` (written by `models add` from the first build; a rebuild must
 * write the same names, as for every derived folder).
 *
 * @module
 */

import { CONVERTERS } from "../convert/mod.ts";
import type { WrittenFile } from "../convert/mod.ts";
import { SET_CONVERTERS } from "./checkpoint_set.ts";

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

const fileConverters: Record<string, LockConverter> = Object.fromEntries(
  Object.entries(CONVERTERS).map(([name, c]) => [
    name,
    {
      version: c.version,
      describe: c.describe,
      inputProblem: (inputs) => c.inputProblem(inputs),
      optionsProblem: (options) =>
        options === undefined ? undefined : `converter "${name}" takes no options`,
      outputs: (inputs) => c.outputs(inputs),
      run: (inputs, outDir) => c.run(inputs, outDir),
    } satisfies LockConverter,
  ]),
);

/** Every converter by the name a `[[derived]]` table gives. */
export const LOCK_CONVERTERS: Readonly<Record<string, LockConverter>> = {
  ...fileConverters,
  ...SET_CONVERTERS,
};

/** The converter names, for messages. */
export const LOCK_CONVERTER_NAMES: readonly string[] = Object.keys(LOCK_CONVERTERS);
