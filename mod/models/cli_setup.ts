/**
 * What every `deno task models` subcommand starts from: the model part of the
 * configuration with `--root` / `--lock` applied, and the report line on
 * stdout (logs and progress go to stderr).
 *
 * @module
 */

import { join, resolve } from "node:path";
import { type CheckedConfig } from "./check.ts";
import { defaultConfigPath, loadConfig, type ResolvedConfig } from "../config/mod.ts";
import { toLockPath } from "./required.ts";

const encoder = new TextEncoder();

/** The command's report (stdout; logs and progress go to stderr). */
export function out(line: string): void {
  Deno.stdout.writeSync(encoder.encode(line + "\n"));
}

/** The model part of the config, with `--root` / `--lock` applied. */
export interface Setup {
  /** The model part of the config (`--root` applied), with `[lora]` and `[prompt]`. */
  config: CheckedConfig & Pick<ResolvedConfig, "lora" | "prompt">;
  /** The config file read, or undefined for the defaults. */
  configPath: string | undefined;
  /** The resolved `[lora] files` (under the `--root` models root). */
  lora: ResolvedConfig["lora"];
  /** The resolved `[generation] preset` (which may add a LoRA of its own). */
  preset: ResolvedConfig["generation"]["preset"];
  /** `[runtime] execution_provider`: the precision a converted set gets by default. */
  provider: ResolvedConfig["runtime"]["executionProvider"];
}

/** Moves every configured path from the config's root to `root` (the `--root` override). */
function rebase(
  config: ResolvedConfig,
  root: string,
): CheckedConfig & Pick<ResolvedConfig, "lora" | "prompt"> {
  const from = config.models.root;
  const move = (p: string) => join(root, toLockPath(p, from));
  const cn = config.controlnet;
  return {
    models: {
      root,
      lock: config.models.lock,
      base: move(config.models.base),
      controlnetUnet: move(config.models.controlnetUnet),
      vaeDecoder: config.models.vaeDecoder,
      tinyVaeDecoder: move(config.models.tinyVaeDecoder),
      vae: config.models.vae ? move(config.models.vae) : null,
    },
    controlnet: {
      depth: {
        enabled: cn.depth.enabled,
        model: move(cn.depth.model),
        preprocessor: move(cn.depth.preprocessor),
      },
      openpose: {
        enabled: cn.openpose.enabled,
        model: move(cn.openpose.model),
        detector: move(cn.openpose.detector),
        estimator: move(cn.openpose.estimator),
      },
      inpaint: { enabled: cn.inpaint.enabled, model: move(cn.inpaint.model) },
    },
    lora: { files: config.lora.files.map((f) => ({ ...f, path: move(f.path) })) },
    prompt: {
      ...config.prompt,
      embeddings: config.prompt.embeddings.map((e) => ({ ...e, path: move(e.path) })),
    },
  };
}

/**
 * Reads the config (`--config`, else the default path) as `deno task models`
 * sees it: stdio transport, paths moved to `--root`, the lock from `--lock`.
 */
export async function setup(v: { config?: string; lock?: string; root?: string }): Promise<Setup> {
  const configPath = v.config ?? await defaultConfigPath();
  // stdio: the HTTP secrets are irrelevant to model files.
  const config = await loadConfig({ path: configPath, overrides: { transport: "stdio" } });
  const models = rebase(config, v.root !== undefined ? resolve(v.root) : config.models.root);
  if (v.lock !== undefined) models.models.lock = resolve(v.lock);
  return {
    config: models,
    configPath,
    lora: models.lora,
    preset: config.generation.preset,
    provider: config.runtime.executionProvider,
  };
}
