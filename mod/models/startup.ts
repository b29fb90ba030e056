/**
 * The start-up model check: exactly the files the configuration needs
 * (`neededFiles` in required.ts) must be in models.lock, present, of the locked size
 * and hash; other lock entries are ignored. Cheap on every start (size + a
 * recorded hash keyed by path/size/mtime); a full sha256 only when a file
 * changed. Derived files (`[[derived]]`) whose inputs check out are built
 * when they are missing or stale (`derived.ts`), so a changed or truncated
 * derived file is rebuilt rather than loaded. A LoRA listed twice in the
 * resolved list (the preset's own LoRA written into `[lora] files` too, or one
 * file under two paths) is refused here, before anything is merged.
 *
 * @module
 */

import { log } from "../log/mod.ts";
import { assertLorasListedOnce } from "../lora/mod.ts";
import { assertConfiguredFiles, type CheckedConfig, type ConfigCheck } from "./check.ts";
import { ensureLockDerived } from "./derived_lock.ts";
import { readLock } from "./lock.ts";

/** What the start-up check needs from the resolved config. */
export type StartupModelConfig = CheckedConfig & {
  /** The resolved LoRA list (the user's `[lora] files`, then the preset's), with weights. */
  lora?: { files: ReadonlyArray<{ path: string; weight?: number }> };
};

/** Options of the start-up check. */
export interface StartupOptions {
  /** A shutdown during start-up: stop waiting for a derived build (see `unfinished.ts`). */
  signal?: AbortSignal;
}

/**
 * Builds every needed `[[derived]]` folder of `check` that is not in place
 * (its inputs are); returns how many were built.
 */
export async function buildDerivedFiles(
  config: CheckedConfig,
  check: ConfigCheck,
  options: StartupOptions = {},
): Promise<number> {
  const todo = check.derived.filter((d) => d.inputsOk && !d.check.ok);
  if (todo.length === 0) return 0;
  const { files } = await readLock(config.models.lock);
  for (const d of todo) {
    options.signal?.throwIfAborted();
    const why = d.check.ok ? "" : `${d.check.problem}: ${d.check.detail}`;
    log("info", "models", "building a derived model folder", { path: d.entry.path, reason: why });
    await ensureLockDerived(config.models.root, d.entry, files, options.signal);
  }
  return todo.length;
}

/**
 * The sha256 models.lock pins for a needed file, by its absolute path (as
 * the resolved config names it); undefined for a file the lock does not pin.
 */
export function pinnedSha256(check: ConfigCheck): (path: string) => string | undefined {
  const byPath = new Map(check.files.flatMap((f) => f.entry ? [[f.abs, f.entry.sha256]] : []));
  return (path) => byPath.get(path);
}

/**
 * Refuses a LoRA listed twice in the resolved list (by path, by file, or by
 * the content models.lock pins), which would be merged twice.
 *
 * @throws RepeatedLoraError naming each repeat and what to remove
 */
export async function assertConfiguredLorasOnce(
  config: StartupModelConfig,
  check: ConfigCheck,
): Promise<void> {
  await assertLorasListedOnce(config.lora?.files ?? [], {
    sha256Of: pinnedSha256(check),
    root: config.models.root,
  });
}

/**
 * Checks the configured model files against the lock, refuses a LoRA listed
 * twice, then builds the derived files that are missing or stale.
 *
 * @throws ModelFilesError naming each bad file, where it was expected, the
 * config key that needs it and the fix (download, or `deno task models add`);
 * RepeatedLoraError naming a LoRA listed twice
 */
export async function verifyConfiguredModels(
  config: StartupModelConfig,
  options: StartupOptions = {},
): Promise<void> {
  const check = await assertConfiguredFiles(config);
  await assertConfiguredLorasOnce(config, check);
  await buildDerivedFiles(config, check, options);
}
