/**
 * Runs the server (`deno run -P=serve main.ts --transport http`) as a
 * subprocess that is expected to exit on its own, as a start-up that fails
 * does, and collects what it printed.
 *
 * @module
 */

import { ROOT } from "./paths.ts";

/**
 * Starts the HTTP server on `config` with an empty environment and waits
 * (at most `timeoutMs`) for it to exit.
 *
 * @returns the exit code and the decoded stderr
 */
export async function serveOnce(
  config: string,
  timeoutMs = 120_000,
): Promise<{ code: number; stderr: string }> {
  const run = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-P=serve", "main.ts", "--config", config, "--transport", "http"],
    cwd: ROOT,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
    env: { NO_COLOR: "1" },
    clearEnv: true,
    signal: AbortSignal.timeout(timeoutMs),
  }).output();
  return { code: run.code, stderr: new TextDecoder().decode(run.stderr) };
}
