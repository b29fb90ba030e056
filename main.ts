/**
 * generate-image-sd15-mcp: an MCP server for local Stable Diffusion 1.5 on
 * ONNX Runtime. This file only parses the command line and wires things.
 *
 * ```sh
 * deno task serve [--config PATH] [--transport stdio|http] [--host H] [--port P]
 * deno task serve --check [--config PATH]   # verify config + models, then exit
 * deno task serve --version
 * ```
 *
 * @module
 */

import { parseArgs } from "node:util";
import { type App, checkSetup, startApp, versionLine } from "./mod/app/mod.ts";
import { type Help, printHelp, usageText } from "./mod/cli/mod.ts";
import { ConfigError, defaultConfigPath, loadConfig } from "./mod/config/mod.ts";
import { DECODE_CHILD_FLAG, runDecodeChild } from "./mod/image/mod.ts";
import { log } from "./mod/log/mod.ts";
import { removeUnfinishedBuilds } from "./mod/models/mod.ts";

const HELP: Help = {
  usage: [
    "deno task serve [--config PATH] [--transport stdio|http] [--host H] [--port P]",
    "deno task serve --check [--config PATH]",
    "deno task serve --version",
  ],
  summary: "Starts the MCP server: over stdio for a desktop client (the default), or over " +
    "streamable HTTP (POST /mcp, GET /healthz) for shared use with API keys. Settings come " +
    "from the config file; the flags below replace its [server] keys.",
  options: [
    [
      "--config PATH",
      "config file (default: $SD_MCP_CONFIG, else ./config.toml when present, else the " +
      "defaults); <name>.local.toml beside it, when present, is read over it",
    ],
    ["--transport T", "stdio (default) or http; replaces [server] transport"],
    ["--host H", "HTTP listen address (default 127.0.0.1); replaces [server] host"],
    ["--port P", "HTTP port (default 8080; 0 = any free port, logged); replaces [server] port"],
    [
      "--check",
      "verify the config, the model files against models.lock and that the models load, " +
      "print what was checked, then exit (0 = ready to serve)",
    ],
    ["-V, --version", "print the version and exit"],
    ["-h, --help", "print this help and exit"],
  ],
  notes: [
    "Environment: MCP_ENV (local or production; replaces [server] environment), DATABASE_URL " +
    "(PostgreSQL for API keys and jobs; else the embedded one in <data_dir>/postgres), " +
    "CLOUDFRONT_SECRET_HEADER (required over HTTP in production), BACKEND_INTERNAL_URL and " +
    "BACKEND_INTERNAL_API_KEY (the design-code tools), SD_MCP_LOG_LEVEL (debug, info, warn, " +
    "error). Logs go to stderr; over stdio, stdout carries the protocol.",
    "Exit status: 0 stopped cleanly or --check passed, 1 start-up or check failed, 2 a " +
    "command-line or config mistake.",
  ],
};

/** The message of anything thrown: libraries may throw plain objects, which must not print as `[object Object]`. */
function errorText(error: unknown): string {
  if (error instanceof Error) return error.message || error.name;
  const message = (error as { message?: unknown } | null)?.message;
  if (typeof message === "string" && message) return message;
  try {
    return JSON.stringify(error) ?? String(error);
  } catch {
    return String(error);
  }
}

async function main(): Promise<number> {
  // A standalone binary decodes input images in a copy of itself (mod/image/decode_process.ts).
  if (Deno.args.length === 1 && Deno.args[0] === DECODE_CHILD_FLAG) {
    await runDecodeChild();
    return 0;
  }
  let values;
  try {
    ({ values } = parseArgs({
      args: Deno.args,
      options: {
        config: { type: "string" },
        transport: { type: "string" },
        host: { type: "string" },
        port: { type: "string" },
        help: { type: "boolean", short: "h" },
        check: { type: "boolean" },
        version: { type: "boolean", short: "V" },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    Deno.stderr.writeSync(
      new TextEncoder().encode(`${(error as Error).message}\n${usageText(HELP)}\n`),
    );
    return 2;
  }
  if (values.help) return printHelp(HELP);
  if (values.version) {
    console.log(versionLine());
    return 0;
  }
  let port: number | undefined;
  if (values.port !== undefined) {
    port = /^\d+$/.test(values.port) ? Number(values.port) : NaN;
    if (Number.isNaN(port)) {
      log("error", "main", `--port must be a number from 0 to 65535, got "${values.port}"`);
      return 2;
    }
  }
  const path = values.config ?? await defaultConfigPath();
  // Signals are handled from the start: a stop while the models are checked, converted, merged
  // or opened ends the process within the shutdown grace, leaving no half-written cache.
  const startup = new AbortController();
  let app: App | undefined;
  let loaded = false;
  /** The shutdown grace, once the config is read. */
  let grace: number | undefined;
  // Once: Ctrl-C under `deno task` reaches this process twice (from the terminal, to the
  // whole process group, and forwarded by deno task).
  let stopping = false;
  const stop = (signal: Deno.Signal) => {
    if (stopping) return;
    stopping = true;
    if (loaded) {
      log("info", "main", "shutting down: no new requests; letting the running generation finish");
    } else if (grace === undefined) {
      // The config is still being read: nothing was started yet.
      exit(0);
    } else {
      log("info", "main", `${signal} while starting: abandoning the model load and shutting down`);
      startup.abort(new Error(`stopped by ${signal} while starting`));
      // Nothing may hold the process past the grace while it starts (a stalled database, say).
      // Once the models are loaded, the app bounds its own shutdown (it lets a generation end).
      setTimeout(() => {
        log("warn", "main", `still starting ${grace} ms after ${signal}; exiting now`);
        exit(1);
      }, grace);
    }
    void app?.shutdown();
  };
  const onInt = () => stop("SIGINT");
  const onTerm = () => stop("SIGTERM");
  Deno.addSignalListener("SIGINT", onInt);
  Deno.addSignalListener("SIGTERM", onTerm);
  try {
    const config = await loadConfig({
      path,
      overrides: { transport: values.transport, host: values.host, port },
    });
    grace = config.server.shutdownGraceMs;
    if (values.check) {
      for (const line of await checkSetup(config, { signal: startup.signal })) console.log(line);
      return 0;
    }
    app = await startApp(config, { signal: startup.signal });
    if (stopping) void app.shutdown();
    app.ready.then(() => loaded = true, () => {});
    await app.finished;
    return 0;
  } catch (error) {
    if (error instanceof ConfigError) {
      log("error", "main", error.message);
      return 2;
    }
    if (stopping && startup.signal.aborted) {
      log("info", "main", values.check ? "check interrupted" : "stopped before the models loaded");
      return values.check ? 1 : 0;
    }
    const what = values.check ? "check failed" : "start-up failed";
    log("error", "main", `${what}: ${errorText(error)}`);
    return 1;
  } finally {
    Deno.removeSignalListener("SIGINT", onInt);
    Deno.removeSignalListener("SIGTERM", onTerm);
  }
}

/**
 * Ends the process: first removes what a build abandoned by a stop during
 * start-up may have left half-written (mod/models/unfinished.ts).
 */
function exit(code: number): never {
  const removed = removeUnfinishedBuilds();
  if (removed.length > 0) log("info", "main", "removed unfinished model builds", { removed });
  Deno.exit(code);
}

exit(await main());
