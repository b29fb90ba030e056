/**
 * Runs `deno task models …` as a user would, in any folder: the repository's
 * deno.json (its `models` permission set) and the models CLI, the folder as
 * the working directory.
 *
 * @module
 */

import { join } from "node:path";
import { ROOT } from "./paths.ts";

/** Exit status and both streams of one run. */
export interface ModelsRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** `deno task models <args>` in `cwd`, with `env` added to the environment. */
export async function modelsTask(
  cwd: string,
  args: readonly string[],
  env: Record<string, string> = {},
): Promise<ModelsRun> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--config",
      join(ROOT, "deno.json"),
      "-P=models",
      "--quiet",
      join(ROOT, "mod/models/cli.ts"),
      ...args,
    ],
    cwd,
    stdin: "null",
    env: { NO_COLOR: "1", ...env },
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}
