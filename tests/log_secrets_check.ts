/**
 * Run by `deno task test` after every other test (a separate `deno test`
 * of this one file; its name does not match `*_test.ts`, so the main run
 * does not pick it up): no log line of the whole run — in-process servers'
 * stderr, every spawned server's and CLI's stderr — holds a secret a test
 * used, or anything shaped like a generated API key. See
 * helpers/log_secrets.ts. The logs are kept for reading either way; the
 * list of secrets is deleted when none was found.
 */

import assert from "node:assert/strict";
import { forgetSecrets, LOG_DIR_ENV, scanRunLogs } from "./helpers/log_secrets.ts";

Deno.test("no secret in any log line of the whole test run", () => {
  const dir = Deno.env.get(LOG_DIR_ENV);
  assert.ok(dir, `${LOG_DIR_ENV} is not set: run this through deno task test`);
  const scan = scanRunLogs(dir);
  // Not vacuous: the run registered keys and passwords and captured real log output.
  assert.ok(scan.secrets >= 10, `only ${scan.secrets} secrets were registered`);
  assert.ok(scan.files >= 2, `only ${scan.files} log files were captured`);
  assert.ok(scan.lines >= 50, `only ${scan.lines} log lines were captured`);
  assert.deepEqual(
    scan.findings,
    [],
    `secrets in the logs of this run (kept in ${dir}):\n${scan.findings.join("\n")}`,
  );
  console.error(
    `searched ${scan.lines} lines in ${scan.files} log files for ${scan.secrets} secrets: none found`,
  );
  // The logs stay for reading (the run's report names them); the list of secrets goes.
  forgetSecrets(dir);
});
