/**
 * Runs each input-image decode in a process of its own
 * (`decode_child.ts`), so that a decode past its deadline is really
 * stopped: the process is killed (SIGKILL) and its memory and threads go
 * with it. libvips' own `timeout` is checked only as pixels flow, never
 * inside libjpeg's input pass, and a Worker's `terminate()` does not stop
 * the native thread (both measured on a 2-core x86-64 VM: a decode of
 * 8,000 scans ran 16 s past a 10 s timeout, and kept a core busy for the 3 s
 * watched after its Worker was terminated).
 *
 * One process per decode, so no tenant's image is decoded in a process that
 * held another's: starting one (Deno, sharp and libvips loaded) costs about
 * 80 ms and 65 MB on an idle 2-core x86-64 VM, and several times that on a
 * busy one. A server keeps spare processes started ahead
 * ({@link keepSpareDecoders}): once it has decoded an image, up to that
 * many wait, loaded, for the next decodes, and each one taken is replaced
 * in the background, so a call does not wait for a start; after
 * {@link SPARE_IDLE_MS} without a decode they are stopped.
 *
 * The process is the server's own executable, run through
 * `/proc/self/exe` on Linux (one fixed path the `serve` permission set can
 * allow; `Deno.execPath()` elsewhere): `deno run` of `decode_child.ts`
 * with read, sys, env and FFI (for sharp) permissions only, or, in a
 * standalone binary, the binary itself with {@link DECODE_CHILD_FLAG}.
 * Its environment holds only {@link CHILD_ENV}, so no secret of the server's reaches it. Where the server
 * may not start it, decodes run in the server's process (with libvips'
 * timeout only) and a warning says so once.
 *
 * @module
 */

import { fileURLToPath as fromFileUrl } from "node:url";
import { log } from "../log/mod.ts";
import {
  DECODE_CHILD_FLAG,
  type DecodeAnswer,
  decodeFrame,
  type DecodeOrder,
  decodeOrder,
  encodeFrame,
} from "./decode_child.ts";
import type { RawPixels } from "./sharp.ts";

/**
 * A decode process that ended without answering. `started` is false when
 * it exited with an error code (it could not start: the server's fault,
 * not the image's), true when a signal ended it mid-decode (a crash, or the
 * kernel's out-of-memory killer).
 */
export class DecodeProcessFailure extends Error {
  /** Whether the process had started decoding (see the class documentation). */
  readonly started: boolean;

  /** Creates the failure; `message` says how the process ended. */
  constructor(message: string, started: boolean) {
    super(message);
    this.name = "DecodeProcessFailure";
    this.started = started;
  }
}

/** Options of {@link decodeIsolated}. */
export interface DecodeIsolatedOptions {
  /** Deadline from the start of the decode to its answer, in ms; past it the process is killed. */
  timeoutMs: number;
  /** Called with the decode process's id when the decode starts (tests). */
  onSpawn?: (pid: number) => void;
}

/** How to start a decode process, or why it cannot be started. */
type ChildCommand = { path: string; args: string[] } | { unavailable: string };

/**
 * The only environment variables a decode process gets: where Deno's module
 * cache is (the child is `deno run --cached-only`) and the temp folder. An
 * allowlist, not a list of secrets to blank: nothing of the server's
 * environment reaches it unless named here, and Deno refuses to start a
 * process whose environment holds `LD_*` variables unless every program may
 * be run, which the `serve` permission set does not allow.
 */
export const CHILD_ENV = ["HOME", "DENO_DIR", "XDG_CACHE_HOME", "TMPDIR"] as const;

/** {@link CHILD_ENV}'s variables that `get` finds (a variable it may not read is left out). */
export function childEnv(get: (name: string) => string | undefined): Record<string, string> {
  const env: Record<string, string> = { DENO_NO_UPDATE_CHECK: "1" };
  for (const name of CHILD_ENV) {
    try {
      const value = get(name);
      if (value !== undefined) env[name] = value;
    } catch { /* not readable under this permission set: the child does without */ }
  }
  return env;
}

/** Most bytes of the decode process's stderr kept for a failure message. */
const STDERR_BYTES = 8192;

let cached: ChildCommand | undefined;
let warned = false;

/** How long spare decode processes wait for a decode before they are stopped. */
export const SPARE_IDLE_MS = 10 * 60_000;

/**
 * Spare processes wanted (0 = none), those waiting (started at a decode,
 * so none before the first), and the timer that stops them when idle.
 */
const spares = {
  wanted: 0,
  waiting: [] as Deno.ChildProcess[],
  idle: undefined as ReturnType<typeof setTimeout> | undefined,
};

function spawnChild(command: { path: string; args: string[] }): Deno.ChildProcess {
  return new Deno.Command(command.path, {
    args: command.args,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
    clearEnv: true,
    env: childEnv((name) => Deno.env.get(name)),
  }).spawn();
}

/** Kills `child` and releases its pipes. */
async function stopChild(child: Deno.ChildProcess): Promise<void> {
  try {
    child.kill("SIGKILL");
  } catch { /* already gone */ }
  await Promise.allSettled([
    child.status,
    child.stdin.close(),
    child.stdout.cancel(),
    child.stderr.cancel(),
  ]);
}

/** A started decode process: a spare when one waits (then a replacement starts), else a new one. */
function takeChild(command: { path: string; args: string[] }): Deno.ChildProcess {
  if (spares.wanted === 0) return spawnChild(command);
  const child = spares.waiting.shift() ?? spawnChild(command);
  while (spares.waiting.length < spares.wanted) spares.waiting.push(spawnChild(command));
  clearTimeout(spares.idle);
  spares.idle = setTimeout(() => void stopSpares(), SPARE_IDLE_MS);
  Deno.unrefTimer(spares.idle);
  return child;
}

async function stopSpares(): Promise<void> {
  clearTimeout(spares.idle);
  spares.idle = undefined;
  await Promise.all(spares.waiting.splice(0).map(stopChild));
}

/** The ids of the spare decode processes waiting now (tests). */
export function spareDecoderPids(): number[] {
  return spares.waiting.map((child) => child.pid);
}

/** Holders of {@link holdSpareDecoders}. */
let holders = 0;

/**
 * While held, keeps up to `count` decode processes started ahead, from the
 * first decode on (see the module documentation). Returns the release,
 * which stops the waiting processes once no holder is left and resolves
 * when they are gone (call it at shutdown).
 */
export function holdSpareDecoders(count: number): () => Promise<void> {
  holders++;
  spares.wanted = Math.max(spares.wanted, count);
  let released = false;
  return async () => {
    if (released) return;
    released = true;
    if (--holders > 0) return;
    spares.wanted = 0;
    await stopSpares();
  };
}

function selfExecutable(): string {
  return Deno.build.os === "linux" ? "/proc/self/exe" : Deno.execPath();
}

/** Works out, once, how decode processes start here. */
function childCommand(): ChildCommand {
  if (cached) return cached;
  const path = selfExecutable();
  if (Deno.permissions.querySync({ name: "run", command: path }).state !== "granted") {
    return cached = { unavailable: `the server may not run ${path} (--allow-run)` };
  }
  if (Deno.build.standalone) return cached = { path, args: [DECODE_CHILD_FLAG] };
  const child = new URL("./decode_child.ts", import.meta.url);
  if (child.protocol !== "file:") {
    return cached = { unavailable: `the server's modules are not files (${child.protocol})` };
  }
  const root = new URL("../../", import.meta.url);
  return cached = {
    path,
    args: [
      "run",
      "--quiet",
      "--no-prompt",
      "--cached-only",
      "--config",
      fromFileUrl(new URL("deno.json", root)),
      "--allow-read",
      "--allow-sys",
      "--allow-env",
      `--allow-ffi=${fromFileUrl(new URL("node_modules", root))}`,
      fromFileUrl(child),
    ],
  };
}

async function readCapped(stream: ReadableStream<Uint8Array>, cap: number): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of stream) {
    if (size < cap) chunks.push(chunk.subarray(0, cap - size));
    size += chunk.length;
  }
  const out = new Uint8Array(Math.min(size, cap));
  let offset = 0;
  for (const c of chunks) {
    out.set(c, offset);
    offset += c.length;
  }
  return out;
}

/** The last non-empty line of a process's stderr, without terminal colours. */
function lastLine(stderr: Uint8Array): string {
  // deno-lint-ignore no-control-regex
  const text = new TextDecoder().decode(stderr).replace(/\x1b\[[0-9;]*m/g, "");
  return text.split("\n").map((l) => l.trim()).filter((l) => l.length > 0).at(-1) ?? "";
}

/**
 * Decodes `bytes` and resizes them as `order` says, in a decode process
 * killed at `timeoutMs`. Rejects with an `Error` whose message starts with
 * "timeout" past the deadline, else with the decoder's message.
 */
export async function decodeIsolated(
  order: DecodeOrder,
  bytes: Uint8Array,
  options: DecodeIsolatedOptions,
): Promise<RawPixels> {
  const command = childCommand();
  if ("unavailable" in command) {
    if (!warned) {
      warned = true;
      log("warn", "image", "input images are decoded in the server's process", {
        why: command.unavailable,
        effect: "a decode past its timeout cannot be stopped there",
      });
    }
    return await decodeOrder(order, bytes);
  }
  const child = takeChild(command);
  options.onSpawn?.(child.pid);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    try {
      child.kill("SIGKILL");
    } catch { /* already gone */ }
  }, options.timeoutMs);
  try {
    const writer = child.stdin.getWriter();
    // A killed process closes its stdin under the write: that failure is the timeout's.
    const writing = writer.write(encodeFrame(order, bytes)).then(() => writer.close())
      .catch(() => {});
    const [out, err, status] = await Promise.all([
      readCapped(
        child.stdout,
        65_536 + Math.max(...order.sizes.map((z) => z.width * z.height)) * 4,
      ),
      readCapped(child.stderr, STDERR_BYTES),
      child.status,
      writing,
    ]);
    if (timedOut) {
      throw new Error(
        `timeout: still decoding after ${options.timeoutMs} ms; its process was stopped`,
      );
    }
    let answer: { header: DecodeAnswer; payload: Uint8Array };
    try {
      answer = decodeFrame<DecodeAnswer>(out);
    } catch {
      const why = status.signal ? `signal ${status.signal}` : `exit code ${status.code}`;
      const detail = lastLine(err);
      log("warn", "image", "the decode process failed", { why, stderr: detail });
      throw new DecodeProcessFailure(
        `the decode process ended without an answer (${why}${detail ? `: ${detail}` : ""})`,
        status.signal !== null,
      );
    }
    const header = answer.header;
    if (!header.ok) throw new Error(header.message);
    if (answer.payload.length !== header.width * header.height * header.channels) {
      throw new Error(
        `the decode process sent ${answer.payload.length} bytes for ` +
          `${header.width}×${header.height}×${header.channels}`,
      );
    }
    return {
      width: header.width,
      height: header.height,
      channels: header.channels,
      data: answer.payload.slice(),
    };
  } finally {
    clearTimeout(timer);
  }
}
