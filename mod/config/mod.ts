/**
 * Configuration: `config.toml`, the user's `config.local.toml` over it, plus
 * secrets from the environment, validated and resolved once at start-up. The
 * raw schema (`schema.ts`) and the resolution step (`resolve.ts`) are
 * internal: the rest of the program sees only {@link loadConfig} and the
 * {@link ResolvedConfig} it returns.
 *
 * @module
 */

export {
  CONFIG_ENV_VARS,
  defaultConfigPath,
  embeddedDatabaseDir,
  formatIssues,
  loadConfig,
} from "./load.ts";
export type { ConfigOverrides, LoadConfigOptions } from "./load.ts";
export {
  AUTO_BASE,
  autoPreset,
  ConfigError,
  PRESETS,
  samplingSummary,
  samplingText,
} from "./resolve.ts";
export type {
  ControlNetConfig,
  PresetName,
  PresetValues,
  PromptSyntax,
  ResolvedConfig,
  SamplingSummary,
  SchedulerName,
} from "./resolve.ts";
export { type ConfigEdit, ConfigEditError, editConfigText, readWrittenConfig } from "./edit.ts";
export { localOverlayPath, mergeTables } from "./overlay.ts";
