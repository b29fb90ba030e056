/**
 * "Nothing secret in any log line of the whole test run", the
 * test side: `deno task test` gives the run a log directory
 * (`SD15_TEST_LOG_DIR`: `.cache/test-logs`, see test_runner.ts). Into it go:
 *
 * - every line the test process itself writes to stderr — the log lines of
 *   servers started in-process — through the `--preload` module
 *   `log_capture.ts`;
 * - the whole stderr of every server or CLI a test spawns ({@link teeChildLog});
 * - the secrets tests create or use ({@link registerSecret},
 *   {@link createTestKey}, the test database's password).
 *
 * {@link scanRunLogs} then searches every log line for every registered
 * secret and for anything shaped like a generated API key; `deno task test`
 * runs it after all tests (`tests/log_secrets_check.ts`). A spawned
 * process's output is also checked at once, against the secrets known so
 * far, so the test that spawned it fails where the leak happened. Without
 * the variable (a plain `deno test`) nothing is written, and that immediate
 * check uses the secrets the current test module registered.
 *
 * @module
 */

import {
  appendFileSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { type CreatedKey, createKey, type CreateKeyOptions } from "../../mod/auth/create_key.ts";
import type { Queryable } from "../../mod/db/mod.ts";

/** Environment variable naming the run's log directory. */
export const LOG_DIR_ENV = "SD15_TEST_LOG_DIR";

/** File of registered secrets, one JSON string per line. */
const SECRETS_FILE = "secrets.jsonl";

/** A generated key anywhere in a line: `guinness_` + 12 + `_` + 43 base62 characters. */
const KEY_SHAPE = /guinness_[0-9A-Za-z]{12}_[0-9A-Za-z]{43}(?![0-9A-Za-z])/;

/** Shorter values are not registered: they would match by chance. */
const MIN_SECRET_LENGTH = 8;

let spawned = 0;
let inProcessFile: string | undefined;
/** Secrets registered by this test module (for the immediate checks). */
const registered = new Set<string>();

/** The run's log directory (created if missing), or undefined outside `deno task test`. */
export function runLogDir(): string | undefined {
  const dir = Deno.env.get(LOG_DIR_ENV);
  if (!dir) return undefined;
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  return dir;
}

/**
 * Appends text the test process wrote to stderr to the run's
 * `in-process-<pid>.log` (log_capture.ts calls it for every write; a test
 * that captures stderr itself calls it too, so its lines are searched as well).
 */
export function teeInProcess(text: string): void {
  // Fixed at the first write, so a test that points LOG_DIR_ENV elsewhere does not divert it.
  if (inProcessFile === undefined) {
    const dir = runLogDir();
    if (dir === undefined) return;
    inProcessFile = join(dir, `in-process-${Deno.pid}.log`);
  }
  try {
    appendFileSync(inProcessFile, text, { mode: 0o600 });
  } catch {
    // The directory was removed (the run is over): nothing to record into.
  }
}

/** Deletes the run's list of registered secrets (`dir`: the run's log directory). */
export function forgetSecrets(dir: string): void {
  rmSync(join(dir, SECRETS_FILE), { force: true });
}

/** Registers values that must never appear in a log line. */
export function registerSecret(...values: string[]): void {
  const kept = values.filter((value) => value.length >= MIN_SECRET_LENGTH);
  for (const value of kept) registered.add(value);
  const dir = runLogDir();
  const lines = kept.map((value) => JSON.stringify(value) + "\n").join("");
  if (dir !== undefined && lines !== "") {
    writeFileSync(join(dir, SECRETS_FILE), lines, { flag: "a", mode: 0o600 });
  }
}

/** The secrets registered so far: those in the run directory `dir`, plus this module's. */
export function registeredSecrets(dir: string | undefined = runLogDir()): string[] {
  const all = new Set(registered);
  if (dir !== undefined) {
    try {
      const text = readFileSync(join(dir, SECRETS_FILE), "utf8");
      for (const line of text.split("\n")) if (line !== "") all.add(JSON.parse(line));
    } catch {
      // Nothing registered in the directory yet.
    }
  }
  return [...all];
}

/** `createKey`, with the key and its secret registered. */
export async function createTestKey(db: Queryable, options: CreateKeyOptions): Promise<CreatedKey> {
  const created = await createKey(db, options);
  registerSecret(created.key, created.key.slice(created.key.lastIndexOf("_") + 1));
  return created;
}

/** Registers the key a `keys create` run printed as its last stdout line; returns it. */
export function registerPrintedKey(stdout: string): string {
  const key = stdout.trimEnd().split("\n").at(-1) ?? "";
  if (key.startsWith("guinness_")) registerSecret(key, key.slice(key.lastIndexOf("_") + 1));
  return key;
}

/**
 * Where `text` holds a secret: one description per finding, naming the line
 * and the secret's index and length, never the secret itself.
 */
export function secretFindings(text: string, secrets: readonly string[], where: string): string[] {
  const findings: string[] = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (KEY_SHAPE.test(line)) findings.push(`${where}:${i + 1}: a whole API key`);
    for (let s = 0; s < secrets.length; s++) {
      if (line.includes(secrets[s])) {
        findings.push(
          `${where}:${i + 1}: registered secret #${s} (${secrets[s].length} characters)`,
        );
      }
    }
  }
  return findings;
}

/**
 * Saves a spawned process's stderr in the run directory and fails at once
 * (throws) when it holds a secret registered so far or a whole API key.
 */
export function teeChildLog(label: string, stderr: string | Uint8Array): void {
  const text = typeof stderr === "string" ? stderr : new TextDecoder().decode(stderr);
  // Each test module has its own counter, so a random part keeps names apart.
  const name = `child-${++spawned}-${crypto.randomUUID().slice(0, 8)}-${
    label.replace(/[^a-z0-9_-]/gi, "_")
  }.log`;
  const dir = runLogDir();
  if (dir !== undefined) writeFileSync(join(dir, name), text, { mode: 0o600 });
  const findings = secretFindings(text, registeredSecrets(), name);
  if (findings.length > 0) {
    throw new Error(`a secret reached the stderr of ${label}:\n${findings.join("\n")}`);
  }
}

/** What {@link scanRunLogs} saw. */
export interface RunLogScan {
  /** Log files read. */
  files: number;
  /** Lines read. */
  lines: number;
  /** Secrets registered. */
  secrets: number;
  /** Where a secret appeared (empty when none). */
  findings: string[];
}

/** Searches every `*.log` of the run directory for every registered secret and key shape. */
export function scanRunLogs(dir: string): RunLogScan {
  const secrets = registeredSecrets(dir);
  const scan: RunLogScan = { files: 0, lines: 0, secrets: secrets.length, findings: [] };
  for (const name of readdirSync(dir).sort()) {
    if (!name.endsWith(".log")) continue;
    const text = readFileSync(join(dir, name), "utf8");
    scan.files++;
    scan.lines += text.split("\n").length;
    scan.findings.push(...secretFindings(text, secrets, name));
  }
  return scan;
}
