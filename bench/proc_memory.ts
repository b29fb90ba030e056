/**
 * Resident memory of this process from `/proc/self/status` (Linux): the
 * current RSS (`VmRSS`) and the peak since start (`VmHWM`). Deno's
 * `memoryUsage().rss` has no peak, and native allocations by ONNX Runtime
 * are only visible to the kernel's counters.
 *
 * @module
 */

/** Current and peak resident set size, in bytes. */
export interface ProcMemory {
  /** `VmRSS`: resident now. */
  rss: number;
  /** `VmHWM`: the highest resident size so far. */
  peak: number;
}

/** Reads `VmRSS` and `VmHWM`; falls back to `Deno.memoryUsage().rss` for both off Linux. */
export function procMemory(): ProcMemory {
  let text: string;
  try {
    text = Deno.readTextFileSync("/proc/self/status");
  } catch {
    const rss = Deno.memoryUsage().rss;
    return { rss, peak: rss };
  }
  const kb = (key: string) => {
    const m = new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(text);
    return m ? Number(m[1]) * 1024 : 0;
  };
  return { rss: kb("VmRSS"), peak: kb("VmHWM") };
}

/**
 * Peak resident memory of process `pid`, sampled every 200 ms with
 * `ps -o rss=` by this process: the child's own `VmHWM` under-reports ONNX
 * Runtime's memory-mapped weights, the child cannot sample while
 * `session.run` blocks its event loop, and Deno lets only `--allow-all` read
 * another process's `/proc/<pid>/status`.
 */
export function sampleRss(pid: number): { stop(): Promise<number> } {
  let peak = 0;
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      try {
        const out = await new Deno.Command("ps", { args: ["-o", "rss=", "-p", String(pid)] })
          .output();
        const kb = Number(new TextDecoder().decode(out.stdout).trim());
        if (Number.isFinite(kb)) peak = Math.max(peak, kb * 1024);
      } catch { /* ps missing or the process exited */ }
      await new Promise((r) => setTimeout(r, 200));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      return peak;
    },
  };
}
