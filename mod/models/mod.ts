/**
 * Model files: `models.lock` parsing, the downloader behind
 * `deno task models`, and the start-up verification of the files.
 *
 * @module
 */

export {
  type LockEntry,
  LockError,
  MODEL_COMPONENTS,
  type ModelComponent,
  parseComponentList,
  parseModelsLock,
  readModelsLock,
  relativePathProblem,
  selectComponents,
  urlProblem,
} from "./lock.ts";
export {
  checkModelFiles,
  ModelFilesError,
  verifyModelFiles,
  type VerifyOptions,
  type VerifyProblem,
  type VerifyResult,
} from "./verify.ts";
export {
  type CacheRecord,
  emptyCache,
  loadVerifyCache,
  saveVerifyCache,
  type VerifyCache,
} from "./verify_cache.ts";
export {
  downloadModelFiles,
  type DownloadOptions,
  type DownloadReport,
  type FileOutcome,
} from "./download.ts";
export {
  BASE_COMPONENTS,
  BASE_FILES,
  componentsFor,
  configModelPaths,
  type EnabledFeatures,
  enabledFeatures,
  type ModelPathsConfig,
  requireLocked,
  toLockPath,
} from "./required.ts";
export { formatBytes, formatDuration, ProgressLine, type ProgressOptions } from "./progress.ts";
export { sha256File } from "./sha256_file.ts";
export { type StartupModelConfig, verifyConfiguredModels } from "./startup.ts";
