/**
 * `deno task test`'s report (tests/helpers/test_runner.ts), run on a small
 * suite of its own: one line per file, the failure in full, ignored tests
 * with their reasons, deno's summary line verbatim (what .ci/run reads), and
 * what the tests print kept in the log file, not on the terminal.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { ignoredTests, ReportParser } from "./helpers/test_runner.ts";
import { ROOT } from "./helpers/paths.ts";

const SUITE = {
  "a_test.ts": `Deno.test("passes", () => {});
Deno.test("fails", () => {
  console.error("2026-01-01T00:00:00.000Z ERROR [fault] deliberate noise");
  throw new Error("boom");
});
Deno.test({ name: "needs podman [ignored: podman is not installed]", ignore: true, fn() {} });
`,
  "b_test.ts": `Deno.test("b", async (t) => {
  console.log("------- output -------");
  await t.step({ name: "step [ignored: not root]", ignore: true, fn() {} });
});
`,
};

Deno.test("the test report: files, failures, ignored tests with reasons, the summary; noise in the log", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sd15-report-" });
  try {
    for (const [name, text] of Object.entries(SUITE)) {
      await Deno.writeTextFile(join(dir, name), text);
    }
    const logs = join(dir, "logs");
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-P=test", "--quiet", "tests/helpers/test_runner.ts", dir],
      cwd: ROOT,
      env: { NO_COLOR: "1", SD15_TEST_LOG_DIR: logs },
      stdin: "null",
    }).output();
    const stdout = new TextDecoder().decode(out.stdout);
    assert.equal(out.code, 1, stdout);
    assert.match(
      stdout,
      /^FAILED +\d+\.\ds +\S*a_test\.ts {2}\(3 tests, 1 ignored\) {2}failed: fails$/m,
    );
    assert.match(stdout, /^ok +\d+\.\ds +\S*b_test\.ts {2}\(1 test\)$/m);
    assert.match(stdout, /^failures:\n {2}fails => \S*a_test\.ts:2:6\n {2}error: Error: boom$/m);
    assert.match(stdout, /^ignored \(2\):$/m);
    assert.match(
      stdout,
      /^ {2}needs podman \[ignored: podman is not installed\] \(\S*a_test\.ts\)$/m,
    );
    assert.match(stdout, /^ {2}b > step \[ignored: not root\] \(\S*b_test\.ts\)$/m);
    // deno's own summary line, as .ci/run parses it.
    assert.match(stdout, /^FAILED \| 2 passed \| 1 failed \| 1 ignored \(1 step\) \(\d+m?s\)$/m);
    // What the tests printed is in the log, not in the report.
    assert.doesNotMatch(stdout, /deliberate noise/);
    const log = await Deno.readTextFile(join(logs, "deno-test.log"));
    assert.match(log, /ERROR \[fault\] deliberate noise/);
    assert.match(stdout, new RegExp(`logs: \\S*${logs.split("/").pop()}/$`, "m"));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("ReportParser: captured output is not read as results; steps count with their test", () => {
  const lines: string[] = [];
  let t = 0;
  const parser = new ReportParser((line) => lines.push(line), () => (t += 1000));
  for (
    const line of [
      "running 2 tests from ./x_test.ts",
      "first ...",
      "------- output -------",
      "fake ... FAILED (1ms)",
      "running 9 tests from ./fake_test.ts",
      "----- output end -----",
      "first ... ok (2ms)",
      "second ...",
      "  inner ... FAILED (1ms)",
      "second ... FAILED (3ms)",
      "",
      " ERRORS ",
      "",
      "second => ./x_test.ts:5:6",
      "error: AssertionError",
      " FAILURES ",
      "second => ./x_test.ts:5:6",
      "FAILED | 1 passed | 1 failed (1 step) (5ms)",
    ]
  ) parser.line(line);
  parser.end();
  assert.deepEqual(lines, ["FAILED    1.0s  ./x_test.ts  (2 tests)  failed: second"]);
  assert.equal(parser.output.summary, "FAILED | 1 passed | 1 failed (1 step) (5ms)");
  assert.deepEqual(parser.output.errors, [
    "",
    "second => ./x_test.ts:5:6",
    "error: AssertionError",
  ]);
  assert.deepEqual(
    ignoredTests(
      '<testcase name="a &amp; &quot;b&quot;" classname="./y.ts" time="0" line="1" col="1">\n' +
        "            <skipped/>\n        </testcase>",
    ),
    ['a & "b" (./y.ts)'],
  );
});
