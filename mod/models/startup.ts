/**
 * The start-up model check: every file the configuration needs must be in
 * models.lock, present, of the locked size and hash. Cheap on every start
 * (size + a recorded hash keyed by path/size/mtime); a full sha256 only when
 * a file changed.
 *
 * @module
 */

import { readModelsLock } from "./lock.ts";
import {
  componentsFor,
  configModelPaths,
  enabledFeatures,
  type ModelPathsConfig,
  requireLocked,
  toLockPath,
} from "./required.ts";
import { verifyModelFiles } from "./verify.ts";

/** What the start-up check needs from the resolved config. */
export interface StartupModelConfig extends ModelPathsConfig {
  /** The model paths, plus `lock`: absolute path of `models.lock`, whose hashes are verified. */
  models: ModelPathsConfig["models"] & { lock: string };
}

/**
 * Checks the configured model files against the lock.
 *
 * @throws an error that names each bad file and says to run `deno task models`
 */
export async function verifyConfiguredModels(config: StartupModelConfig): Promise<void> {
  const entries = await readModelsLock(config.models.lock);
  requireLocked(configModelPaths(config), entries, config.models.root, config.models.lock);
  const wanted = new Set(componentsFor(enabledFeatures(config)));
  // LoRA files are checked one by one: only the configured ones are needed.
  const loras = new Set(
    (config.lora?.files ?? []).map((f) => toLockPath(f.path, config.models.root)),
  );
  await verifyModelFiles({
    root: config.models.root,
    entries: entries.filter((e) =>
      wanted.has(e.component) && (e.component !== "lora" || loras.has(e.path))
    ),
  });
}
