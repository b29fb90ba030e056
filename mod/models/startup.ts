/**
 * The start-up model check: exactly the files the configuration needs
 * (`neededFiles` in required.ts) must be in models.lock, present, of the locked size
 * and hash; other lock entries are ignored. Cheap on every start (size + a
 * recorded hash keyed by path/size/mtime); a full sha256 only when a file
 * changed. Derived files (`[[derived]]`) whose inputs check out are built
 * when they are missing or stale (`derived.ts`), so a changed or truncated
 * derived file is rebuilt rather than loaded.
 *
 * @module
 */

import { log } from "../log/mod.ts";
import { assertConfiguredFiles, type CheckedConfig, type ConfigCheck } from "./check.ts";
import { ensureLockDerived } from "./derived_lock.ts";
import { readLock } from "./lock.ts";

/** What the start-up check needs from the resolved config. */
export type StartupModelConfig = CheckedConfig;

/**
 * Builds every needed `[[derived]]` folder of `check` that is not in place
 * (its inputs are); returns how many were built.
 */
export async function buildDerivedFiles(
  config: CheckedConfig,
  check: ConfigCheck,
): Promise<number> {
  const todo = check.derived.filter((d) => d.inputsOk && !d.check.ok);
  if (todo.length === 0) return 0;
  const { files } = await readLock(config.models.lock);
  for (const d of todo) {
    const why = d.check.ok ? "" : `${d.check.problem}: ${d.check.detail}`;
    log("info", "models", "building a derived model folder", { path: d.entry.path, reason: why });
    await ensureLockDerived(config.models.root, d.entry, files);
  }
  return todo.length;
}

/**
 * Checks the configured model files against the lock, then builds the
 * derived ones that are missing or stale.
 *
 * @throws ModelFilesError naming each bad file, where it was expected, the
 * config key that needs it and the fix (download, or `deno task models add`)
 */
export async function verifyConfiguredModels(config: StartupModelConfig): Promise<void> {
  const check = await assertConfiguredFiles(config);
  await buildDerivedFiles(config, check);
}
