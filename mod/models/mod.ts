/**
 * Model files: `models.lock` parsing and writing, the downloader behind
 * `deno task models`, `models add` (lock an own export after checking it
 * against the model contract), `models check`, the start-up verification
 * of exactly the files the configuration needs, and derived files (made here
 * from pinned ones, recorded and verified alike: the fp32 set, the ONNX TAESD
 * decoder, the merged-LoRA cache).
 *
 * @module
 */

export {
  BASE_COMPONENTS,
  type DerivedEntry,
  type LockEntry,
  LockError,
  MODEL_COMPONENTS,
  type ModelComponent,
  type ModelsLock,
  parseComponentList,
  parseLock,
  parseModelsLock,
  readLock,
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
export { HostUnreachableError } from "./fetch_failure.ts";
export { PROXY_ENV_VARS, type ProxyChoice, proxyFor } from "./proxy.ts";
export {
  BASE_FILES,
  type ModelPathsConfig,
  type NeededFile,
  type NeededFiles,
  neededFiles,
  toLockPath,
} from "./required.ts";
export {
  addCommand,
  assertConfiguredFiles,
  checkConfiguredFiles,
  type CheckedConfig,
  type ConfigCheck,
  type FileCheck,
  type FileState,
} from "./check.ts";
export {
  ADD_COMPONENTS,
  type AddComponent,
  AddError,
  addModels,
  type AddOptions,
  type AddResult,
  COMPONENT_KEY,
} from "./add.ts";
export {
  checkComponentFile,
  checkExportFolder,
  CONTRACT_OF,
  type ExportCheck,
  type ExportFile,
} from "./export_check.ts";
export { ADDED_MARK, derivedToml, entryToml, updateLockText } from "./lock_write.ts";
export { formatBytes, formatDuration, ProgressLine, type ProgressOptions } from "./progress.ts";
export {
  assertConfiguredLorasOnce,
  buildDerivedFiles,
  pinnedSha256,
  type StartupModelConfig,
  type StartupOptions,
  verifyConfiguredModels,
} from "./startup.ts";
export { removeUnfinishedBuilds, untilAborted } from "./unfinished.ts";
export {
  checkDerived,
  DERIVED_RECORD,
  type DerivedCheck,
  type DerivedOptions,
  type DerivedProblem,
  type DerivedRecipe,
  type DerivedRecord,
  ensureDerived,
  type EnsureResult,
  readDerivedRecord,
  recipeKey,
  type RecordedFile,
} from "./derived.ts";
export type { WrittenFile } from "../convert/mod.ts";
export { type MergeConfig, MERGED_DIR, type MergedPaths, prepareMergedModels } from "./merged.ts";
