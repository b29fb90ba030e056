/**
 * Preloaded into every test module by `deno task test` (`deno test
 * --preload`): everything the test process writes to stderr — above all the
 * log lines of servers started in-process — is also appended to
 * `in-process-<pid>.log` in the run's log directory, which
 * `tests/log_secrets_check.ts` searches for secrets after the run (see
 * log_secrets.ts). Output is unchanged.
 *
 * @module
 */

import { teeInProcess as tee } from "./log_secrets.ts";

const marker = Symbol.for("sd15.logCapture");
const globals = globalThis as Record<symbol, unknown>;

// The preload runs once per test module in the same process: wrap only once.
if (!globals[marker]) {
  globals[marker] = true;
  const decoder = new TextDecoder();
  const stderr = Deno.stderr as {
    writeSync(p: Uint8Array): number;
    write(p: Uint8Array): Promise<number>;
  };
  const writeSync = stderr.writeSync.bind(Deno.stderr);
  const write = stderr.write.bind(Deno.stderr);
  stderr.writeSync = (p: Uint8Array) => {
    tee(decoder.decode(p));
    return writeSync(p);
  };
  stderr.write = (p: Uint8Array) => {
    tee(decoder.decode(p));
    return write(p);
  };
  // console.* (the SDK, libraries) does not go through Deno.stderr.
  for (const method of ["log", "info", "warn", "error", "debug"] as const) {
    const original = console[method].bind(console);
    console[method] = (...args: unknown[]) => {
      tee(args.map((a) => typeof a === "string" ? a : Deno.inspect(a)).join(" ") + "\n");
      original(...args);
    };
  }
}
