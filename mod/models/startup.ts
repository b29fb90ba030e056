/**
 * The start-up model check: exactly the files the configuration needs
 * (`neededFiles` in required.ts) must be in models.lock, present, of the locked size
 * and hash; other lock entries are ignored. Cheap on every start (size + a
 * recorded hash keyed by path/size/mtime); a full sha256 only when a file
 * changed.
 *
 * @module
 */

import { assertConfiguredFiles, type CheckedConfig } from "./check.ts";

/** What the start-up check needs from the resolved config. */
export type StartupModelConfig = CheckedConfig;

/**
 * Checks the configured model files against the lock.
 *
 * @throws ModelFilesError naming each bad file, where it was expected, the
 * config key that needs it and the fix (download, or `deno task models add`)
 */
export async function verifyConfiguredModels(config: StartupModelConfig): Promise<void> {
  await assertConfiguredFiles(config);
}
