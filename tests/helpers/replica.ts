/**
 * Server replicas as real processes (`main.ts --transport http`) on one
 * database, for the scale-out tests and benchmark (docs/deploy.md).
 *
 * @module
 */

import { ROOT } from "./paths.ts";
import { followStderr } from "./child_stderr.ts";
import { writeTinyConfig } from "./tiny_config.ts";

/** A running replica. */
export interface Replica {
  /** Its `[server] role`. */
  role: "all" | "front" | "worker";
  /** Its HTTP port (`/mcp` for all/front, `/healthz` only for workers). */
  port: number;
  /** Its process id (the prefix of its worker name in the job rows). */
  pid: number;
  /** What it printed on stderr so far. */
  stderr(): string;
  /** Sends SIGKILL (no clean-up at all, as a crash). */
  kill(): Promise<void>;
  /** Stops it (SIGTERM, then SIGKILL after `graceMs`) and removes its config. */
  stop(graceMs?: number): Promise<void>;
}

/**
 * Starts `main.ts` with the tiny models (or `models.root` and `models.lock`),
 * `role`, `sections` (TOML) and `DATABASE_URL = url`, and waits until it
 * listens. `models.cpu` pins the process to that CPU (`taskset`), as one
 * engine per GPU would own its device; `models.server` adds `[server]` keys.
 */
export async function startReplica(
  role: Replica["role"],
  url: string,
  sections: string,
  models: {
    root?: string;
    lock?: string;
    cpu?: number;
    /** More `[server]` keys (e.g. raised per-client limits). */
    server?: Record<string, string | number>;
  } = {},
): Promise<Replica> {
  const temp = await writeTinyConfig(sections, { ...models.server, role });
  if (models.root || models.lock) {
    // Another models folder (one that does not exist, for a front that must not need it,
    // or the bench's wider set).
    let text = await Deno.readTextFile(temp.path);
    if (models.root) text = text.replace(/^root = .*$/m, `root = ${JSON.stringify(models.root)}`);
    if (models.lock) text = text.replace(/^lock = .*$/m, `lock = ${JSON.stringify(models.lock)}`);
    await Deno.writeTextFile(temp.path, text);
  }
  const serve = ["run", "-P=serve", "--quiet", "main.ts", "--config", temp.path, "--transport"];
  const pinned = models.cpu !== undefined;
  const child = new Deno.Command(pinned ? "taskset" : Deno.execPath(), {
    args: pinned
      ? ["--cpu-list", String(models.cpu), Deno.execPath(), ...serve, "http"]
      : [...serve, "http"],
    cwd: ROOT,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
    env: { NO_COLOR: "1", DATABASE_URL: url, SD_MCP_LOG_LEVEL: level() },
  }).spawn();
  const stderr = followStderr(child.stderr);
  let exited = false;
  const status = child.status.then((s) => {
    exited = true;
    return s;
  });
  const listening = /(?:listening on|worker health on) http:\/\/127\.0\.0\.1:(\d+)\//;
  let port: number;
  try {
    port = Number((await stderr.waitFor(listening, `listening (replica ${role})`))[1]);
  } catch (error) {
    try {
      child.kill("SIGKILL");
    } catch { /* gone */ }
    await status;
    await temp.remove();
    throw error;
  }
  const drained = stderr.drain();
  const end = async () => {
    await status;
    await drained;
    await temp.remove().catch(() => {});
  };
  return {
    role,
    port,
    pid: child.pid,
    stderr: () => stderr.text(),
    async kill() {
      if (!exited) child.kill("SIGKILL");
      await end();
    },
    async stop(graceMs = 15_000) {
      if (!exited) child.kill("SIGTERM");
      const timer = setTimeout(() => {
        try {
          child.kill("SIGKILL");
        } catch { /* gone */ }
      }, graceMs);
      await end();
      clearTimeout(timer);
    },
  };
}

/** Polls `condition` every 25 ms until it holds or `timeoutMs` passes; returns whether it held. */
export async function until(
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 60_000,
): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await condition()) return true;
    await new Promise((r) => setTimeout(r, 25));
  }
  return false;
}

/** The replicas' log level: `REPLICA_LOG_LEVEL` when set (e.g. `debug` to see lease renewals), else info. */
function level(): string {
  try {
    return Deno.env.get("REPLICA_LOG_LEVEL") ?? "info";
  } catch {
    return "info";
  }
}
