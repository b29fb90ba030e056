/**
 * The `models.lock` `[[derived]]` folders as {@link DerivedRecipe}s: the
 * converter named by the entry, its current version, and the locked sha256
 * of each input; checked and built with `derived.ts`.
 *
 * @module
 */

import { join } from "node:path";
import { LOCK_CONVERTERS } from "./lock_converters.ts";
import {
  checkDerived,
  type DerivedCheck,
  type DerivedRecipe,
  ensureDerived,
  type EnsureResult,
} from "./derived.ts";
import type { DerivedEntry, LockEntry } from "./lock.ts";

/** The recipe of a `[[derived]]` entry: its converter and version, its inputs' locked sha256. */
export function lockRecipe(d: DerivedEntry, files: readonly LockEntry[]): DerivedRecipe {
  const byPath = new Map(files.map((f) => [f.path, f]));
  return {
    converter: d.converter,
    version: LOCK_CONVERTERS[d.converter].version,
    inputs: d.from.map((path) => ({ path, sha256: byPath.get(path)!.sha256 })),
    ...(d.options !== undefined ? { params: d.options } : {}),
  };
}

const names = (d: DerivedEntry) => d.outputs.map((o) => o.slice(d.path.length + 1));

/** Whether the folder of `d` under `root` holds what its converter makes from its inputs. */
export function checkLockDerived(
  root: string,
  d: DerivedEntry,
  files: readonly LockEntry[],
): Promise<DerivedCheck> {
  return checkDerived(join(root, d.path), lockRecipe(d, files), { names: names(d) });
}

/**
 * Builds the folder of `d` when it is not in place (its inputs must have been
 * verified against the lock first); `signal` abandons the build (see
 * {@link ensureDerived}).
 */
export function ensureLockDerived(
  root: string,
  d: DerivedEntry,
  files: readonly LockEntry[],
  signal?: AbortSignal,
): Promise<EnsureResult> {
  const converter = LOCK_CONVERTERS[d.converter];
  const inputs = d.from.map((p) => join(root, ...p.split("/")));
  return ensureDerived(
    join(root, d.path),
    lockRecipe(d, files),
    async (into) => ({ files: await converter.run(inputs, into, d.options, signal) }),
    { names: names(d), signal },
  );
}
