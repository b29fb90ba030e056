/**
 * Resident memory and CPU time of another process, sampled from outside
 * every 200 ms (`cat /proc/<pid>/stat`: Deno lets only `--allow-all` read
 * another process's `/proc` files, a child process may). The peak resident
 * size is what `sampleRss` (`proc_memory.ts`) reports; the CPU time gives the
 * share of the cores a process used over a window (CPU seconds ÷ wall
 * seconds: 2.0 is two busy cores), which shows how many threads a runtime
 * really computed on.
 *
 * @module
 */

import { splitLines, type TimedLine } from "./peers_report.ts";

/** One sample: when (ms, `performance.now()`), resident bytes, CPU ms (user + system). */
export interface ProcSample {
  /** `performance.now()` of this process when the sample was read. */
  t: number;
  /** Resident set size, bytes. */
  rss: number;
  /** User plus system CPU time of all the process's threads so far, ms. */
  cpuMs: number;
}

/**
 * Parses a `/proc/<pid>/stat` line (proc(5)): `utime` and `stime` (fields 14
 * and 15, clock ticks) and `rss` (field 24, pages). The command name (field
 * 2) is in parentheses and may hold spaces, so fields are counted after its
 * closing parenthesis.
 */
export function parseProcStat(
  text: string,
  ticksPerSecond: number,
  pageSize: number,
): { rss: number; cpuMs: number } | null {
  const close = text.lastIndexOf(")");
  if (close < 0) return null;
  // After ")": field 3 (state) is index 0.
  const fields = text.slice(close + 2).trim().split(/\s+/);
  const utime = Number(fields[14 - 3]);
  const stime = Number(fields[15 - 3]);
  const rss = Number(fields[24 - 3]);
  if (![utime, stime, rss].every(Number.isFinite)) return null;
  return { rss: rss * pageSize, cpuMs: ((utime + stime) * 1000) / ticksPerSecond };
}

/**
 * CPU share over [from, to] (ms, `performance.now()`): CPU time between the
 * last sample at or before `from` and the first at or after `to`, over the
 * wall time between those two samples. Null when the window has no such
 * pair of samples.
 */
export function cpuShareBetween(samples: readonly ProcSample[], from: number, to: number) {
  let a: ProcSample | undefined;
  let b: ProcSample | undefined;
  for (const s of samples) {
    if (s.t <= from) a = s;
    if (s.t >= to && !b) b = s;
  }
  // A window that ends with the process: its last sample is the nearest there is.
  b ??= samples.at(-1);
  if (!a || !b || b.t - a.t <= 0 || b.t <= from) return null;
  return (b.cpuMs - a.cpuMs) / (b.t - a.t);
}

async function getconf(name: string, fallback: number): Promise<number> {
  try {
    const out = await new Deno.Command("getconf", { args: [name] }).output();
    const n = Number(new TextDecoder().decode(out.stdout).trim());
    return Number.isFinite(n) && n > 0 ? n : fallback;
  } catch {
    return fallback;
  }
}

/** Samples process `pid` every `intervalMs` until stopped; the samples and the peak RSS. */
export function sampleProc(pid: number, intervalMs = 200) {
  const samples: ProcSample[] = [];
  let stopped = false;
  const loop = (async () => {
    const ticks = await getconf("CLK_TCK", 100);
    const page = await getconf("PAGESIZE", 4096);
    while (!stopped) {
      try {
        const out = await new Deno.Command("cat", {
          args: [`/proc/${pid}/stat`],
          stderr: "null",
        }).output();
        const parsed = out.success
          ? parseProcStat(new TextDecoder().decode(out.stdout), ticks, page)
          : null;
        if (parsed) samples.push({ t: performance.now(), ...parsed });
      } catch { /* cat missing, or the process exited */ }
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  })();
  return {
    samples,
    /** Stops sampling; resolves to the samples taken. */
    async stop(): Promise<{ samples: ProcSample[]; peakRss: number }> {
      stopped = true;
      await loop;
      return { samples, peakRss: samples.reduce((m, s) => Math.max(m, s.rss), 0) };
    },
  };
}

/** A child run by {@link runSampled}: its timed output lines, exit code, samples. */
export interface SampledRun {
  /** stdout and stderr lines in arrival order, ms since spawn (`\r` ends a line too). */
  lines: TimedLine[];
  /** Exit code. */
  code: number;
  /** `performance.now()` at spawn: add a line's `t` to compare it with a sample's. */
  t0: number;
  /** The samples of {@link sampleProc}. */
  samples: ProcSample[];
  /** Peak resident memory, bytes. */
  peakRss: number;
  /** ms from spawn to exit. */
  ms: number;
}

/** Runs `cmd` with `args`, timing each output line and sampling its memory and CPU. */
export async function runSampled(
  cmd: string,
  args: string[],
  options: { cwd?: string; env?: Record<string, string> } = {},
): Promise<SampledRun> {
  const t0 = performance.now();
  const child = new Deno.Command(cmd, {
    args,
    cwd: options.cwd,
    env: options.env,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const sampler = sampleProc(child.pid);
  const lines: TimedLine[] = [];
  const read = async (stream: ReadableStream<Uint8Array>) => {
    const carry = { rest: "" };
    const decoder = new TextDecoder();
    for await (const chunk of stream) {
      lines.push(
        ...splitLines(decoder.decode(chunk, { stream: true }), performance.now() - t0, carry),
      );
    }
    if (carry.rest) lines.push({ t: performance.now() - t0, text: carry.rest });
  };
  const [status] = await Promise.all([child.status, read(child.stdout), read(child.stderr)]);
  const ms = Math.round(performance.now() - t0);
  const { samples, peakRss } = await sampler.stop();
  lines.sort((a, b) => a.t - b.t);
  return { lines, code: status.code, t0, samples, peakRss, ms };
}
