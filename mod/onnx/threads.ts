/**
 * The thread counts every ONNX Runtime session of this process gets, decided
 * here rather than left to ONNX Runtime: `intra_op_threads = 0` is every core
 * the process may use (`usable_cores.ts`), where ONNX Runtime's own default
 * counts physical cores its own way (one thread on a 2-vCPU VM).
 *
 * Inter-op threads run independent nodes at once and exist only in the
 * "parallel" execution mode: in "sequential" mode ONNX Runtime creates no
 * inter-op pool, whatever the count (a session with `inter_op_threads = 4`
 * and "sequential" started no thread more than one with 0). So 0 there stays
 * "none"; under "parallel", 0 is the usable cores, like the intra-op count.
 * An intra-op count of N is the calling thread (the engine Worker's) and N − 1
 * pool threads, per session; the sessions of one image run one after another,
 * so their pools never compute at the same time.
 *
 * @module
 */

import { processUsableCores, type UsableCores } from "./usable_cores.ts";

/** The `[runtime]` settings that decide thread counts. */
export interface ThreadSettings {
  /** `intra_op_threads`: 0 or absent = the usable cores. */
  intraOpThreads?: number;
  /** `inter_op_threads`: 0 or absent = the usable cores under "parallel", none under "sequential". */
  interOpThreads?: number;
  /** `execution_mode`; default "sequential". */
  executionMode?: "sequential" | "parallel";
}

/** What sessions are created with, and why. */
export interface SessionThreads {
  /** Threads inside one operator (ONNX Runtime's `intraOpNumThreads`). */
  intraOp: number;
  /** Threads across operators; 0 = no inter-op pool ("sequential" execution). */
  interOp: number;
  /** The cores the process may use, which a 0 was resolved to. */
  usableCores: UsableCores;
}

/**
 * Resolves the configured counts: a written count stands, 0 becomes the
 * usable cores (see the module text for inter-op threads).
 *
 * @throws Error when a count is not an integer ≥ 0
 */
export function sessionThreads(
  settings: ThreadSettings,
  cores: UsableCores = processUsableCores(),
): SessionThreads {
  const intra = settings.intraOpThreads ?? 0;
  const inter = settings.interOpThreads ?? 0;
  if (!Number.isInteger(intra) || intra < 0) {
    throw new Error(`intraOpThreads must be an integer >= 0, got ${intra}`);
  }
  if (!Number.isInteger(inter) || inter < 0) {
    throw new Error(`interOpThreads must be an integer >= 0, got ${inter}`);
  }
  const parallel = settings.executionMode === "parallel";
  return {
    intraOp: intra > 0 ? intra : cores.count,
    interOp: parallel ? (inter > 0 ? inter : cores.count) : 0,
    usableCores: cores,
  };
}

/** One line for the start-up log: "2 threads (2 usable cores: affinity 2, no cgroup quota)". */
export function threadsText(t: SessionThreads): string {
  const c = t.usableCores;
  const quota = c.cgroupQuota === null
    ? "no cgroup CPU quota"
    : `cgroup quota ${c.cgroupQuota} CPUs`;
  const affinity = c.affinity === null ? "affinity unknown" : `affinity ${c.affinity} CPUs`;
  const inter = t.interOp > 0 ? `, ${t.interOp} inter-op` : "";
  const threads = `${t.intraOp} intra-op thread${t.intraOp === 1 ? "" : "s"}`;
  return `${threads}${inter} (${c.count} usable cores: ${affinity}, ${quota})`;
}
