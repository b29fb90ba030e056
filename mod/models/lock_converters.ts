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
import { SET_CONVERTERS } from "./checkpoint_set.ts";
import type { LockConverter } from "./lock_converter.ts";

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
