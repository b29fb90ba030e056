/**
 * Configuration: `config.toml`, the user's `config.local.toml` over it, plus
 * secrets from the environment, validated and resolved once at start-up. The
 * raw schema (`schema.ts`) and the resolution step (`resolve.ts` and its
 * parts) are internal: the rest of the program sees only {@link loadConfig} and the
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
export { ConfigError } from "./error.ts";
export { AUTO_BASE } from "./models.ts";
export { autoPreset, PRESETS, samplingSummary, samplingText } from "./presets.ts";
export type { PresetName, PresetValues, SamplingSummary } from "./presets.ts";
export type { PromptSyntax } from "./prompt.ts";
export type { ControlNetConfig, ResolvedConfig, SchedulerName } from "./resolved.ts";
export { type ConfigEdit, ConfigEditError, editConfigText, readWrittenConfig } from "./edit.ts";
export { localOverlayPath, mergeTables } from "./overlay.ts";
