/**
 * `deno task compile`: builds the standalone binary `dist/generate-image-sd15-mcp`
 * for this machine's platform, then runs it with `--version` to prove it
 * starts. Fails in one line (exit 1) when the Deno runtime it embeds cannot
 * be obtained, saying what is missing and how to provide it.
 *
 * ```sh
 * deno task compile              # build and smoke-test
 * deno task compile --dry-run    # print the deno compile command only
 * deno task compile --output PATH  # another file name (default dist/generate-image-sd15-mcp)
 * deno task compile --help
 * ```
 *
 * @module
 */

import { parseArgs } from "node:util";
import { isAbsolute, join } from "node:path";
import { fileURLToPath } from "node:url";
import { PROGRAM_NAME, PROGRAM_VERSION } from "../app/version.ts";
import { locateRuntime, RuntimeMissing, type RuntimeSource } from "./runtime.ts";
import { BINARY_PATH, binaryPathFor, compileArgs, foreignNativePackages } from "./plan.ts";
import { type Help, printHelp, usageText } from "../cli/mod.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const PREFIX = "deno task compile";

function fail(message: string): number {
  console.error(`${PREFIX}: ${message}`);
  return 1;
}

async function head(path: string): Promise<Uint8Array | null> {
  try {
    if (!(await Deno.stat(path)).isFile) return null;
    using file = await Deno.open(path);
    const bytes = new Uint8Array(8);
    const n = await file.read(bytes);
    return bytes.subarray(0, n ?? 0);
  } catch {
    return null;
  }
}

/** `path --version`, killed after 10 s: the exit status and the first line it printed. */
async function probe(path: string): Promise<{ code: number | null; firstLine: string }> {
  const child = new Deno.Command(path, {
    args: ["--version"],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).spawn();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill("SIGKILL");
  }, 10_000);
  try {
    const out = await child.output();
    const text = new TextDecoder().decode(out.stdout).trim() ||
      new TextDecoder().decode(out.stderr).trim();
    return { code: timedOut ? null : out.code, firstLine: text.split("\n")[0] };
  } finally {
    clearTimeout(timer);
  }
}

async function reachable(url: string): Promise<boolean> {
  try {
    // Any answer counts; redirects are not followed (they lead to other hosts).
    const response = await fetch(url, {
      method: "HEAD",
      redirect: "manual",
      signal: AbortSignal.timeout(10_000),
    });
    await response.body?.cancel();
    return true;
  } catch {
    return false;
  }
}

/** Deno's cache folder as the `deno` that will compile sees it (honours `DENO_DIR`). */
async function denoDir(): Promise<string> {
  const output = await new Deno.Command("deno", { args: ["info", "--json"], cwd: ROOT }).output();
  if (!output.success) throw new Error("`deno info --json` failed");
  return JSON.parse(new TextDecoder().decode(output.stdout)).denoDir;
}

function describe(source: RuntimeSource): string {
  switch (source.kind) {
    case "env":
      return `runtime from DENORT_BIN=${source.path}`;
    case "cache":
      return `runtime from the cache ${source.path}`;
    case "download":
      return `runtime to be downloaded from ${source.url}`;
  }
}

const HELP: Help = {
  usage: ["deno task compile [--dry-run] [--output PATH]"],
  summary: "Builds the standalone binary dist/generate-image-sd15-mcp for this machine's " +
    "platform (deno compile, self-extracting, with the serve permissions baked in), then runs " +
    "it with --version to prove it starts. The binary needs no Deno; it reads config.toml, " +
    "models.lock and the model files as the server does.",
  options: [
    ["--dry-run", "print where the runtime comes from and the deno compile command, then exit"],
    ["--output PATH", `the binary's path (default ${BINARY_PATH})`],
    ["-h, --help", "print this help and exit"],
  ],
  notes: [
    "deno compile embeds the Deno runtime (denort) of the same version and platform, taken " +
    "from DENORT_BIN (an unzipped denort; checked before compiling: the deno CLI is refused), " +
    "else the cached denort zip in Deno's cache, else downloaded from dl.deno.land. When none " +
    "is available the task says in one line what is missing and how to provide it (exit 1).",
  ],
};

async function main(): Promise<number> {
  const target = Deno.build.target;
  let dryRun: boolean;
  let output: string;
  try {
    const { values } = parseArgs({
      args: Deno.args,
      options: {
        "dry-run": { type: "boolean" },
        output: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
      strict: true,
      allowPositionals: false,
    });
    if (values.help) return printHelp(HELP);
    dryRun = values["dry-run"] ?? false;
    output = values.output ?? binaryPathFor(target);
  } catch (error) {
    return fail(`${(error as Error).message}\n${usageText(HELP)}`);
  }
  let source: RuntimeSource | RuntimeMissing;
  try {
    source = await locateRuntime({
      denortBin: Deno.env.get("DENORT_BIN"),
      denoDir: await denoDir(),
      version: Deno.version.deno,
      target,
      head,
      reachable,
      probe,
    });
  } catch (error) {
    if (!(error instanceof RuntimeMissing)) return fail(String(error));
    source = error;
  }
  const args = compileArgs(target, await foreignNativePackages(ROOT, target), output);
  if (dryRun) {
    const runtime = source instanceof RuntimeMissing
      ? `missing: ${source.message}`
      : describe(source);
    console.log(`# ${runtime}`);
    console.log(["deno", ...args].join(" "));
    return 0;
  }
  if (source instanceof RuntimeMissing) return fail(source.message);
  console.error(`${PREFIX}: ${describe(source)}`);
  const compiled = await new Deno.Command("deno", { args, cwd: ROOT }).spawn().status;
  if (!compiled.success) return fail(`deno compile failed (exit ${compiled.code}); see above`);

  // Smoke test: the first run also unpacks the embedded files beside the binary.
  const binary = isAbsolute(output) ? output : join(ROOT, output);
  const run = await new Deno.Command(binary, {
    args: ["--version"],
    stdin: "null",
    signal: AbortSignal.timeout(120_000),
  }).output().catch((error: Error) => ({
    success: false,
    code: -1,
    stdout: new Uint8Array(),
    stderr: new TextEncoder().encode(error.message),
  }));
  const stdout = new TextDecoder().decode(run.stdout).trim();
  if (!run.success || !stdout.startsWith(`${PROGRAM_NAME} ${PROGRAM_VERSION} `)) {
    const firstLine = (text: string) => text.trim().split("\n")[0];
    const why = firstLine(new TextDecoder().decode(run.stderr)) || firstLine(stdout) ||
      "no output";
    const removed = await Deno.remove(binary).then(() => "removed it", () => "remove it");
    return fail(
      `the compiled binary does not run (--version: exit ${run.code}, ${why}); ${removed}. ` +
        `The runtime must be the denort of Deno ${Deno.version.deno} for ${target} ` +
        `(${describe(source)})`,
    );
  }
  const size = (await Deno.stat(binary)).size;
  console.error(`${PREFIX}: built ${output} (${Math.round(size / 2 ** 20)} MiB)`);
  console.log(stdout);
  return 0;
}

Deno.exit(await main());
