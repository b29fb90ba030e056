/**
 * `deno task fixtures`: builds the test-sized model set into
 * `tests/fixtures/tiny/models/` and `tests/fixtures/tiny/models.lock`. Cheap
 * to call repeatedly: skipped when the stamp (builder version + seed) matches.
 * Flags: `--force` rebuilds; `--seed N` changes the weights.
 *
 * @module
 */

import { fileURLToPath } from "node:url";
import { type Help, printHelp, usageText, wantsHelp } from "../cli/mod.ts";
import { log } from "../log/mod.ts";
import { buildTinyModelSet, DEFAULT_SEED } from "./model_set.ts";

const ROOT = new URL("../../tests/fixtures/tiny/", import.meta.url);

const HELP: Help = {
  usage: ["deno task fixtures [--force] [--seed N]"],
  summary: "Builds the test-sized model set (the real models' input/output contract, channel " +
    "counts scaled down, seeded random weights) into tests/fixtures/tiny/models/ and its lock " +
    "tests/fixtures/tiny/models.lock. Skipped when the set is up to date (same builder version " +
    "and seed).",
  options: [
    ["--force", "rebuild even when the set is up to date"],
    ["--seed N", `the weights' seed, an integer 0..4294967295 (default ${DEFAULT_SEED})`],
    ["-h, --help", "print this help and exit"],
  ],
};

async function main(args: string[]): Promise<number> {
  if (wantsHelp(args)) return printHelp(HELP);
  let seed = DEFAULT_SEED;
  let force = false;
  for (let i = 0; i < args.length; i++) {
    if (args[i] === "--force") force = true;
    else if (args[i] === "--seed") {
      seed = Number(args[++i]);
      if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) {
        log("error", "fixtures", `--seed must be an integer 0..4294967295, got ${args[i]}`);
        return 2;
      }
    } else {
      log("error", "fixtures", `unknown argument ${args[i]}\n${usageText(HELP)}`);
      return 2;
    }
  }
  const root = fileURLToPath(new URL("models", ROOT));
  const lockPath = fileURLToPath(new URL("models.lock", ROOT));
  const set = await buildTinyModelSet(root, { seed, force, lockPath });
  log("info", "fixtures", set.skipped ? "tiny models up to date" : "tiny models built", {
    root: set.root,
    files: set.entries.length,
  });
  return 0;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
