/**
 * `deno task models [--config PATH] [--lock PATH] [--root DIR] [--only C1,C2]`
 *
 * Downloads every models.lock file that is missing or wrong and verifies it.
 * Defaults: lock `./models.lock`, root `./models`. With `--config`, the root
 * and lock come from `[models]` in the config, and (without `--only`) only
 * the components its enabled features need are fetched; `--lock`/`--root`
 * still override. Exit status: 0 all present, 1 some file failed, 2 usage or
 * lock/config error, 130 interrupted (partial files are kept for resuming).
 *
 * @module
 */

import { parseArgs } from "node:util";
import { resolve } from "node:path";
import { log } from "../log/mod.ts";
import { loadConfig } from "../config/mod.ts";
import { downloadModelFiles } from "./download.ts";
import {
  LockError,
  type ModelComponent,
  parseComponentList,
  readModelsLock,
  selectComponents,
} from "./lock.ts";
import { componentsFor, configModelPaths, enabledFeatures, requireLocked } from "./required.ts";

const USAGE = "usage: deno task models [--config PATH] [--lock PATH] [--root DIR] " +
  "[--only COMPONENT,...]";

/** Runs the command with `args`; returns the process exit status. */
export async function main(args: string[], signal?: AbortSignal): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args,
      options: {
        config: { type: "string" },
        lock: { type: "string" },
        root: { type: "string" },
        only: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
      strict: true,
      allowPositionals: false,
    });
  } catch (e) {
    log("error", "models", `${(e as Error).message}; ${USAGE}`);
    return 2;
  }
  const v = parsed.values;
  if (v.help) {
    log("info", "models", USAGE);
    return 0;
  }
  try {
    let root = resolve("models");
    let lockPath = resolve("models.lock");
    let only: ModelComponent[] = v.only !== undefined ? parseComponentList(v.only) : [];
    let neededPaths: string[] = [];
    if (v.config !== undefined) {
      const config = await loadConfig({ path: v.config });
      root = config.models.root;
      lockPath = config.models.lock;
      neededPaths = configModelPaths(config);
      if (v.only === undefined) only = componentsFor(enabledFeatures(config));
    }
    if (v.root !== undefined) root = resolve(v.root);
    if (v.lock !== undefined) lockPath = resolve(v.lock);

    const all = await readModelsLock(lockPath);
    if (neededPaths.length > 0) requireLocked(neededPaths, all, root, lockPath);
    const entries = selectComponents(all, only);
    if (entries.length === 0) {
      log("warn", "models", "nothing to download: no lock entry matches", { lock: lockPath, only });
      return 0;
    }
    const total = entries.reduce((n, e) => n + e.size, 0);
    log("info", "models", "checking model files", {
      root,
      lock: lockPath,
      files: entries.length,
      bytes: total,
    });
    const report = await downloadModelFiles({ root, entries, signal });
    if (report.failed.length > 0) {
      for (const f of report.failed) log("error", "models", `${f.path}: ${f.error}`);
      log("error", "models", `${report.failed.length} of ${entries.length} files failed`);
      return 1;
    }
    log("info", "models", "all model files present and verified", { files: entries.length });
    return 0;
  } catch (e) {
    if (signal?.aborted) {
      log("warn", "models", "interrupted; run `deno task models` again to resume");
      return 130;
    }
    if (e instanceof LockError || (e as Error).name === "ConfigError") {
      log("error", "models", (e as Error).message);
      return 2;
    }
    throw e;
  }
}

if (import.meta.main) {
  const controller = new AbortController();
  const onSignal = () => controller.abort(new Error("interrupted"));
  Deno.addSignalListener("SIGINT", onSignal);
  const code = await main(Deno.args, controller.signal);
  Deno.removeSignalListener("SIGINT", onSignal);
  Deno.exit(code);
}
