/**
 * The secret search of helpers/log_secrets.ts can fail: planted secrets and
 * whole keys are found (and named without being printed); hashes, prefixes
 * and redacted DSNs are not.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { generateApiKey } from "../mod/auth/api_key.ts";
import { sha256Hex } from "../mod/auth/constant_time.ts";
import { LOG_DIR_ENV, scanRunLogs, secretFindings, teeChildLog } from "./helpers/log_secrets.ts";

Deno.test("secretFindings() finds registered secrets and whole keys, never printing them", () => {
  const key = generateApiKey();
  const password = `pw${crypto.randomUUID().replaceAll("-", "")}`;
  const text = [
    `INFO [auth] request refused: wrong secret {"keyPrefix":"${key.prefix}"}`,
    `INFO [auth] request refused {"keyPrefixSha256":"${sha256Hex(key.key).slice(0, 16)}"}`,
    `INFO [db] database ready {"target":"postgres://postgres:***@127.0.0.1:5432/x"}`,
    `WARN [x] leaked ${key.secret} here`,
    `WARN [x] and the key ${key.key}`,
    `WARN [x] dsn postgres://postgres:${password}@h/x`,
  ].join("\n");
  const findings = secretFindings(text, [key.secret, password], "run.log");
  assert.deepEqual(findings, [
    "run.log:4: registered secret #0 (43 characters)",
    "run.log:5: a whole API key",
    "run.log:5: registered secret #0 (43 characters)",
    "run.log:6: registered secret #1 (34 characters)",
  ]);
  assert.ok(!findings.join("\n").includes(key.secret));
});

Deno.test("a spawned process's stderr holding a registered secret fails at once", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sd15-log-secrets-self-test-" });
  const previous = Deno.env.get(LOG_DIR_ENV);
  Deno.env.set(LOG_DIR_ENV, dir);
  try {
    const { registerSecret } = await import("./helpers/log_secrets.ts");
    const secret = `s3cret-${crypto.randomUUID()}`;
    registerSecret(secret);
    teeChildLog("clean server", "INFO [http] listening\n");
    assert.throws(
      () => teeChildLog("leaky server", `WARN oops ${secret}\n`),
      /a secret reached the stderr of leaky server:\n.*registered secret #0/,
    );
    const scan = scanRunLogs(dir);
    assert.equal(scan.files, 2);
    assert.equal(scan.secrets, 1);
    assert.equal(scan.findings.length, 1);
    assert.match(
      scan.findings[0],
      /^child-\d+-[0-9a-f]{8}-leaky_server\.log:1: registered secret #0/,
    );
    await Deno.stat(join(dir, "secrets.jsonl"));
  } finally {
    if (previous === undefined) Deno.env.delete(LOG_DIR_ENV);
    else Deno.env.set(LOG_DIR_ENV, previous);
    await Deno.remove(dir, { recursive: true });
  }
});
