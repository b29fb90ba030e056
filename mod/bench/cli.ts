/**
 * `deno task bench`: the Deno benchmarks (`deno bench`, test-sized models),
 * or with `--full` the full-size benchmark (`full.ts`; not a test).
 *
 * @module
 */

import { runFullBench } from "./full.ts";

async function main(args: string[]): Promise<number> {
  if (args.includes("--full")) return await runFullBench(args.filter((a) => a !== "--full"));
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["bench", "-P=test", ...args],
    stdout: "inherit",
    stderr: "inherit",
  }).output();
  return out.code;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
