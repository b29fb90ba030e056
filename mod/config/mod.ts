/**
 * Configuration: `config.toml` plus secrets from the environment, validated
 * and resolved once at start-up.
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
export { ConfigError, resolveConfig } from "./resolve.ts";
export type { ControlNetConfig, ResolvedConfig, SchedulerName } from "./resolve.ts";
export { RawConfigSchema } from "./schema.ts";
export type { RawConfig } from "./schema.ts";
