/**
 * `deno task test`: runs the test suite and prints a report a person can
 * read — one line per test file as it finishes, the failures in full, the
 * ignored tests with their reasons, deno's own summary line and where the
 * logs are. Everything deno test prints (every test's name, the log lines
 * of servers the tests start, the deliberate faults' ERROR and WARN lines)
 * goes to `deno-test.log` in the run's log folder instead; the logs of
 * spawned servers and CLIs go beside it (see log_secrets.ts). After the
 * whole suite, the log secret check (`tests/log_secrets_check.ts`) searches
 * every one of those files.
 *
 * ```sh
 * deno task test                          # everything, then the log secret check
 * deno task test mod/config tests/x_test.ts  # only these (no secret check)
 * ```
 *
 * The log folder is `$SD15_TEST_LOG_DIR` when set, else `.cache/test-logs`
 * (emptied at the start of each run). Exit status: deno test's, or the
 * secret check's when only that failed.
 *
 * @module
 */

import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { join, relative } from "node:path";
import { LOG_DIR_ENV } from "./log_secrets.ts";
import { ROOT } from "./paths.ts";

/** Flags of every deno test run: the lockfile as it is, no registry lookups (see README). */
const DENO_TEST = ["test", "--cached-only", "--frozen", "-P=test"];

const encoder = new TextEncoder();

function print(line: string): void {
  Deno.stdout.writeSync(encoder.encode(line + "\n"));
}

/** One test file's results, as deno test reports them. */
interface FileResult {
  file: string;
  passed: number;
  failed: string[];
  ignored: number;
  startedMs: number;
}

/** What the run printed that the report shows. */
interface RunOutput {
  /** deno's summary line (`ok | 12 passed | 0 failed (3s)`), if it got that far. */
  summary?: string;
  /** The ERRORS section: each failure's message and stack. */
  errors: string[];
  /** The last lines of output, for a run that ended without a summary. */
  tail: string[];
}

/** `lines` without the blank lines at either end. */
function trimBlank(lines: readonly string[]): string[] {
  let start = 0;
  let end = lines.length;
  while (start < end && lines[start].trim() === "") start++;
  while (end > start && lines[end - 1].trim() === "") end--;
  return lines.slice(start, end);
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)}s`;
}

/** The report line of one finished file. */
export function fileLine(result: FileResult, endMs: number): string {
  const total = result.passed + result.failed.length + result.ignored;
  const counts = `${total} test${total === 1 ? "" : "s"}` +
    (result.ignored > 0 ? `, ${result.ignored} ignored` : "");
  const status = result.failed.length > 0 ? "FAILED" : "ok";
  const failed = result.failed.length > 0 ? `  failed: ${result.failed.join("; ")}` : "";
  return `${status.padEnd(6)} ${seconds(endMs - result.startedMs).padStart(7)}  ` +
    `${result.file}  (${counts})${failed}`;
}

/**
 * Follows deno test's pretty output line by line: the file sections, each
 * top-level test's result, the ERRORS section and the summary. Captured test
 * output (between `------- output -------` and `----- output end -----`) is
 * not read as results.
 */
export class ReportParser {
  #file: FileResult | undefined;
  #inOutput = false;
  #section: "tests" | "errors" | "failures" = "tests";
  readonly output: RunOutput = { errors: [], tail: [] };
  readonly #onFile: (line: string) => void;
  readonly #now: () => number;

  /**
   * @param onFile Receives the report line of each file as it finishes.
   * @param now Clock in ms (injectable for tests).
   */
  constructor(onFile: (line: string) => void, now: () => number = () => performance.now()) {
    this.#onFile = onFile;
    this.#now = now;
  }

  /** Reads one line of output (without its newline). */
  line(line: string): void {
    this.output.tail.push(line);
    if (this.output.tail.length > 40) this.output.tail.shift();
    if (/^-{7} (post-test )?output -{7}$/.test(line)) {
      this.#inOutput = true;
      return;
    }
    if (/^-{5} (post-test )?output end -{5}$/.test(line)) {
      this.#inOutput = false;
      return;
    }
    if (this.#inOutput) return;
    const running = line.match(/^running \d+ tests? from (\S+)$/);
    if (running) {
      this.#finishFile();
      this.#file = { file: running[1], passed: 0, failed: [], ignored: 0, startedMs: this.#now() };
      return;
    }
    if (line === " ERRORS ") {
      this.#finishFile();
      this.#section = "errors";
      return;
    }
    if (line === " FAILURES ") {
      this.#section = "failures";
      return;
    }
    if (/^(ok|FAILED) \| \d+ passed/.test(line)) {
      this.#finishFile();
      this.output.summary = line;
      return;
    }
    if (this.#section === "errors") {
      this.output.errors.push(line);
      return;
    }
    // A top-level result; steps are indented and counted by their test.
    const result = line.match(/^(\S.*) \.\.\. (ok|FAILED|ignored) \([^)]*\)$/);
    if (result && this.#file) {
      if (result[2] === "ok") this.#file.passed++;
      else if (result[2] === "FAILED") this.#file.failed.push(result[1]);
      else this.#file.ignored++;
    }
  }

  /** Ends the report of the file in progress (call when the output ends). */
  end(): void {
    this.#finishFile();
  }

  #finishFile(): void {
    if (this.#file === undefined) return;
    this.#onFile(fileLine(this.#file, this.#now()));
    this.#file = undefined;
  }
}

/** The ignored tests and steps of a JUnit report: `name (file)`. */
export function ignoredTests(junitXml: string): string[] {
  const out: string[] = [];
  const unescape = (s: string) =>
    s.replaceAll("&quot;", '"').replaceAll("&apos;", "'").replaceAll("&lt;", "<")
      .replaceAll("&gt;", ">").replaceAll("&amp;", "&");
  const testcase = /<testcase name="([^"]*)" classname="([^"]*)"[^>]*>\s*<skipped\/>/g;
  for (const m of junitXml.matchAll(testcase)) out.push(`${unescape(m[1])} (${unescape(m[2])})`);
  return out;
}

/** Runs `deno <args>` with its output going to `logFile` and through `parser`. */
async function runDeno(
  args: string[],
  logFile: string,
  env: Record<string, string>,
  parser: ReportParser,
): Promise<number> {
  const child = new Deno.Command(Deno.execPath(), {
    args,
    cwd: ROOT,
    env: { NO_COLOR: "1", ...env },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  using log = await Deno.open(logFile, { write: true, create: true, append: true });
  const follow = async (stream: ReadableStream<Uint8Array>, parse: boolean) => {
    let rest = "";
    for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
      await log.write(encoder.encode(chunk));
      if (!parse) continue;
      const lines = (rest + chunk).split("\n");
      rest = lines.pop()!;
      for (const line of lines) parser.line(line);
    }
    if (parse && rest !== "") parser.line(rest);
  };
  const [status] = await Promise.all([
    child.status,
    follow(child.stdout, true),
    follow(child.stderr, false),
  ]);
  parser.end();
  return status.code;
}

async function main(args: string[]): Promise<number> {
  const started = performance.now();
  const fromEnv = Deno.env.get(LOG_DIR_ENV);
  const dir = fromEnv || join(ROOT, ".cache/test-logs");
  if (!fromEnv) rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const shown = relative(Deno.cwd(), dir) || ".";
  const env = { [LOG_DIR_ENV]: dir };
  const whole = args.length === 0;
  print(`running ${whole ? "every test" : args.join(" ")}; full output in ${shown}/deno-test.log`);

  const junit = join(dir, "junit.xml");
  const parser = new ReportParser(print);
  const code = await runDeno(
    [...DENO_TEST, "--preload=tests/helpers/log_capture.ts", `--junit-path=${junit}`, ...args],
    join(dir, "deno-test.log"),
    env,
    parser,
  );
  const { summary, errors, tail } = parser.output;
  const shownErrors = trimBlank(errors);
  if (shownErrors.length > 0) {
    print("\nfailures:");
    for (const line of shownErrors) print(line === "" ? "" : `  ${line}`);
  }
  let ignored: string[] = [];
  try {
    ignored = ignoredTests(readFileSync(junit, "utf8"));
  } catch {
    // no report: the run ended before writing one (the tail below says why)
  }
  if (ignored.length > 0) {
    print(`\nignored (${ignored.length}):`);
    for (const name of ignored) print(`  ${name}`);
  }
  if (summary === undefined) {
    print(`\ndeno test ended (exit ${code}) without its summary; its last lines:`);
    for (const line of tail) print(`  ${line}`);
  } else {
    print("");
    print(summary);
  }
  let status = code;
  if (whole) {
    // The whole run's logs, searched for secrets once every test is done.
    const check = new ReportParser(() => {});
    const checkCode = await runDeno(
      [...DENO_TEST, "tests/log_secrets_check.ts"],
      join(dir, "log-secrets-check.log"),
      env,
      check,
    );
    print(`log secret check (${shown}/log-secrets-check.log):`);
    print(check.output.summary ?? `FAILED | 0 passed | 1 failed (exit ${checkCode})`);
    for (const line of trimBlank(check.output.errors)) print(line === "" ? "" : `  ${line}`);
    if (status === 0) status = checkCode;
  } else {
    print("(only some tests ran: the log secret check runs after the whole suite)");
  }
  print(`took ${seconds(performance.now() - started)}; logs: ${shown}/`);
  return status;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
