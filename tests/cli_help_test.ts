/**
 * `--help` on every task, as a user types it: the help on stdout (not through
 * the logger), exit 0, every flag of the usage lines described, and `-h`
 * the same.
 */

import assert from "node:assert/strict";
import manifest from "../deno.json" with { type: "json" };
import { ROOT } from "./helpers/paths.ts";

const TASKS = [
  "serve",
  "models",
  "prompt",
  "keys",
  "migrate",
  "compile",
  "bench",
  "bench:gpu",
  "fixtures",
] as const;

async function task(name: string, flag: string) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["task", "--quiet", name, flag],
    cwd: ROOT,
    env: { NO_COLOR: "1" },
    stdin: "null",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

Deno.test("every task that runs a program is covered here", () => {
  const programs = Object.entries(manifest.tasks)
    .filter(([, command]) => /deno run .*\.ts/.test(command) && !command.includes("test_runner"))
    .map(([name]) => name);
  assert.deepEqual(programs.sort(), [...TASKS].sort());
});

for (const name of TASKS) {
  Deno.test(`deno task ${name} --help: usage and every flag described, on stdout, exit 0`, async () => {
    const out = await task(name, "--help");
    assert.equal(out.code, 0, out.stderr);
    assert.match(out.stdout, new RegExp(`^usage: deno task ${name}\\b`));
    assert.doesNotMatch(out.stderr, /usage:/, "the help is not written to stderr");
    const lines = out.stdout.split("\n");
    const usage = lines.filter((l) => /^(usage: | {7})deno task /.test(l)).join(" ");
    const described = lines.filter((l) => /^ {2}-/.test(l)).map((l) => l.trim());
    for (const flag of new Set(usage.match(/--[a-z][a-z-]*/g) ?? [])) {
      assert.ok(
        described.some((l) => l.startsWith(flag) || l.includes(`, ${flag}`)),
        `${flag} of the usage is not described:\n${out.stdout}`,
      );
    }
    assert.ok(described.some((l) => l.startsWith("-h, --help")), out.stdout);
    for (const line of described) {
      assert.match(line, /^\S+(, \S+)?( \S+)? {2,}\S/, `a flag without a description: ${line}`);
    }
    const short = await task(name, "-h");
    assert.equal(short.code, 0, short.stderr);
    assert.equal(short.stdout, out.stdout);
  });
}
