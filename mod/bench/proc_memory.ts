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
