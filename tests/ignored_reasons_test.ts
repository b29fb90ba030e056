/**
 * Every ignored test says why: `ignore` is set only through
 * `ignoredFor(reason, name)` (tests/helpers/ignore.ts), which puts the reason
 * in the test's name, so `deno task test` lists each ignored test with it.
 */

import assert from "node:assert/strict";
import { join, relative } from "node:path";
import { ROOT } from "./helpers/paths.ts";

async function* testFiles(dir: string): AsyncGenerator<string> {
  for await (const entry of Deno.readDir(dir)) {
    if (entry.name === "node_modules" || entry.name.startsWith(".")) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory) yield* testFiles(path);
    else if (entry.name.endsWith("_test.ts")) yield path;
  }
}

Deno.test("no test sets ignore without a reason in its name", async () => {
  const bare: string[] = [];
  let files = 0;
  for await (const path of testFiles(ROOT)) {
    files++;
    const lines = (await Deno.readTextFile(path)).split("\n");
    lines.forEach((line, i) => {
      if (/^\s*ignore\s*[:,]/.test(line)) {
        bare.push(`${relative(ROOT, path)}:${i + 1}: ${line.trim()}`);
      }
    });
  }
  assert.ok(files > 100, `only ${files} test files found`);
  assert.deepEqual(bare, [], "use ...ignoredFor(reason, name) from tests/helpers/ignore.ts");
});
