/**
 * How many CPU cores this process may really use: the CPUs of its affinity
 * mask (`sched_getaffinity`, read as `Cpus_allowed_list` of
 * `/proc/self/status`), capped by its cgroup's CPU quota (cgroup v2
 * `cpu.max`, v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`, the smallest along
 * the path from its cgroup to the hierarchy's root). `intra_op_threads = 0`
 * means this number (`threads.ts`).
 *
 * ONNX Runtime's own default is one thread per *physical* core as its CPU
 * detection counts them, which on a 2-vCPU x86-64 VM came out as one thread
 * although `nproc`, `lscpu` and sysfs all showed 2 cores: every image took
 * twice as long as it had to. A quota is rounded down (1.5 CPUs → 1 thread):
 * a second thread would only be throttled with the first, and ONNX Runtime's
 * threads spin while they wait for work, which a quota bills. The same rule as
 * Rust's `std::thread::available_parallelism` and Go's automaxprocs.
 *
 * Sources: proc(5) (`Cpus_allowed_list`, `/proc/self/cgroup`,
 * `/proc/self/mountinfo`); the kernel's cgroup-v2.rst (`cpu.max`: "$MAX
 * $PERIOD", "max" for no limit) and cgroup-v1 sched-bwc.rst
 * (`cpu.cfs_quota_us`, -1 for no limit).
 *
 * The files are read through `system_files.ts` (Deno keeps `/proc` and `/sys`
 * behind `--allow-all`).
 *
 * @module
 */

import { readSystemText } from "./system_files.ts";

/** Reads a text file; null when it does not exist or cannot be read. */
export type ReadText = (path: string) => string | null;

/** The cores this process may use, and what limits them. */
export interface UsableCores {
  /** Threads to compute on: the affinity mask's CPUs, capped by the quota rounded down; ≥ 1. */
  count: number;
  /** CPUs in the affinity mask, or null where `/proc/self/status` cannot be read. */
  affinity: number | null;
  /** The cgroup CPU quota in CPUs (1.5 = 150 ms per 100 ms), or null when there is none. */
  cgroupQuota: number | null;
  /**
   * What decided {@link count}: the affinity mask, the cgroup quota, or, where
   * neither can be read (not Linux), the runtime's count of CPUs
   * (`navigator.hardwareConcurrency`).
   */
  limitedBy: "affinity" | "cgroup quota" | "runtime";
}

/**
 * The usable cores as `read` shows them (the real files by default). Pass a
 * reader of fabricated texts to test.
 */
export function usableCores(
  read: ReadText = readSystemText,
  fallback: () => number = runtimeCpuCount,
): UsableCores {
  const affinity = affinityCount(read("/proc/self/status"));
  const cgroupQuota = quotaCpus(read);
  const base = affinity ?? Math.max(1, Math.floor(fallback()));
  if (cgroupQuota !== null) {
    const capped = Math.max(1, Math.floor(cgroupQuota));
    if (capped < base) return { count: capped, affinity, cgroupQuota, limitedBy: "cgroup quota" };
  }
  return {
    count: base,
    affinity,
    cgroupQuota,
    limitedBy: affinity === null ? "runtime" : "affinity",
  };
}

let cached: UsableCores | undefined;

/** {@link usableCores} of this process, read once per isolate. */
export function processUsableCores(): UsableCores {
  return cached ??= usableCores();
}

/** CPUs in `Cpus_allowed_list` of a `/proc/<pid>/status` text ("0-3,8,10-11" → 7). */
export function affinityCount(status: string | null): number | null {
  if (status === null) return null;
  const line = /^Cpus_allowed_list:\s*(.*)$/m.exec(status);
  if (!line) return null;
  const list = line[1].trim();
  if (list === "") return null;
  let n = 0;
  for (const part of list.split(",")) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part.trim());
    if (!m) return null;
    const from = Number(m[1]);
    const to = m[2] === undefined ? from : Number(m[2]);
    if (to < from) return null;
    n += to - from + 1;
  }
  return n > 0 ? n : null;
}

/** One cgroup hierarchy mounted on this system (a `/proc/self/mountinfo` line). */
interface CgroupMount {
  /** cgroup 2, or cgroup 1 with the `cpu` controller. */
  version: 1 | 2;
  /** The hierarchy path mounted there (the line's "root" field). */
  root: string;
  /** Where it is mounted. */
  mountPoint: string;
}

/**
 * The smallest CPU quota, in CPUs, along the process's cgroup path, in the
 * v2 hierarchy or else the v1 `cpu` one; null when none is set or none can
 * be read.
 */
function quotaCpus(read: ReadText): number | null {
  const cgroups = read("/proc/self/cgroup");
  const mountinfo = read("/proc/self/mountinfo");
  if (cgroups === null || mountinfo === null) return null;
  const mounts = cgroupMounts(mountinfo);
  let smallest: number | null = null;
  for (const { version, path } of cgroupPaths(cgroups)) {
    const mount = mounts.find((m) => m.version === version);
    if (!mount) continue;
    for (const dir of ancestors(mount, path)) {
      const quota = version === 2 ? cpuMax(read(`${dir}/cpu.max`)) : cfsQuota(
        read(`${dir}/cpu.cfs_quota_us`),
        read(`${dir}/cpu.cfs_period_us`),
      );
      if (quota !== null && (smallest === null || quota < smallest)) smallest = quota;
    }
    // One hierarchy holds the cpu controller; v2 first (a hybrid system lists both).
    if (version === 2 && smallest !== null) break;
  }
  return smallest;
}

/** The process's cgroup paths: the v2 one ("0::/path") and the v1 one with the `cpu` controller. */
function cgroupPaths(text: string): Array<{ version: 1 | 2; path: string }> {
  const out: Array<{ version: 1 | 2; path: string }> = [];
  for (const line of text.split("\n")) {
    const m = /^(\d+):([^:]*):(.*)$/.exec(line.trim());
    if (!m) continue;
    if (m[1] === "0" && m[2] === "") out.push({ version: 2, path: m[3] });
    else if (m[2].split(",").includes("cpu")) out.push({ version: 1, path: m[3] });
  }
  return out.sort((a, b) => b.version - a.version);
}

/** The cgroup2 mount and the cgroup1 mount of the `cpu` controller, from mountinfo. */
function cgroupMounts(text: string): CgroupMount[] {
  const out: CgroupMount[] = [];
  for (const line of text.split("\n")) {
    const dash = line.indexOf(" - ");
    if (dash < 0) continue;
    const left = line.slice(0, dash).split(" ");
    const right = line.slice(dash + 3).split(" ");
    if (left.length < 5 || right.length < 3) continue;
    const [fstype, , superOptions] = right;
    const mount = { root: unescapeMount(left[3]), mountPoint: unescapeMount(left[4]) };
    if (fstype === "cgroup2") out.push({ version: 2, ...mount });
    else if (fstype === "cgroup" && superOptions.split(",").includes("cpu")) {
      out.push({ version: 1, ...mount });
    }
  }
  return out;
}

/** mountinfo escapes space, tab, newline and backslash as octal (`\040`). */
function unescapeMount(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
}

/**
 * The folders of the process's cgroup and each ancestor up to the mount
 * point. The path in `/proc/self/cgroup` is relative to the hierarchy's root;
 * the mount shows the hierarchy from its "root" field down (in a container
 * with its own cgroup namespace both are "/").
 */
function ancestors(mount: CgroupMount, path: string): string[] {
  let rel = path;
  const root = mount.root === "/" ? "" : mount.root;
  if (root && (rel === root || rel.startsWith(`${root}/`))) rel = rel.slice(root.length);
  const parts = rel.split("/").filter((p) => p !== "" && p !== "." && p !== "..");
  const base = mount.mountPoint.replace(/\/+$/, "");
  const dirs: string[] = [];
  for (let i = parts.length; i >= 0; i--) {
    dirs.push([base, ...parts.slice(0, i)].join("/") || "/");
  }
  return dirs;
}

/** cgroup v2 `cpu.max` ("150000 100000" → 1.5; "max 100000" → null). */
export function cpuMax(text: string | null): number | null {
  if (text === null) return null;
  const m = /^\s*(max|\d+)\s+(\d+)\s*$/.exec(text);
  if (!m || m[1] === "max") return null;
  const period = Number(m[2]);
  return period > 0 ? Number(m[1]) / period : null;
}

/** cgroup v1 `cpu.cfs_quota_us` over `cpu.cfs_period_us` (-1 → null). */
export function cfsQuota(quota: string | null, period: string | null): number | null {
  if (quota === null || period === null) return null;
  const q = Number(quota.trim());
  const p = Number(period.trim());
  if (!Number.isFinite(q) || !Number.isFinite(p) || q <= 0 || p <= 0) return null;
  return q / p;
}

function runtimeCpuCount(): number {
  return typeof navigator !== "undefined" && navigator.hardwareConcurrency > 0
    ? navigator.hardwareConcurrency
    : 1;
}
