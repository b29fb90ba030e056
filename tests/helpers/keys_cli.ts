/**
 * Runs the API-key CLI (`mod/auth/cli.ts`, as `deno task keys` does) as a
 * subprocess, for the tests that drive it as an operator would.
 *
 * @module
 */

import { ROOT } from "./paths.ts";

/** What one CLI run did. */
export interface KeysRun {
  /** The exit code. */
  code: number;
  /** Everything written to stdout (a created key is printed there). */
  stdout: string;
  /** Everything written to stderr (logs, errors). */
  stderr: string;
}

/** How to run the CLI. */
export interface KeysRunOptions {
  /** Environment variables for the CLI; `NO_COLOR=1` is always added. */
  env?: Record<string, string>;
  /** Start from an empty environment instead of inheriting this process's. */
  clearEnv?: boolean;
  /** Pass `--quiet` to `deno run`, so Deno's own notices stay out of stderr. */
  quiet?: boolean;
}

/**
 * Runs `deno run -P=keys mod/auth/cli.ts <args>` from the repository root,
 * stdin closed, and collects its output.
 *
 * @param args The CLI's arguments, e.g. `["create", "--user", "1", …]`.
 * @param options Environment and flags.
 * @returns The exit code and the decoded stdout and stderr.
 */
export async function runKeysCli(args: string[], options: KeysRunOptions = {}): Promise<KeysRun> {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-P=keys", ...(options.quiet ? ["--quiet"] : []), "mod/auth/cli.ts", ...args],
    cwd: ROOT,
    stdin: "null",
    env: { ...options.env, NO_COLOR: "1" },
    clearEnv: options.clearEnv ?? false,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decoder = new TextDecoder();
  return {
    code: output.code,
    stdout: decoder.decode(output.stdout),
    stderr: decoder.decode(output.stderr),
  };
}
