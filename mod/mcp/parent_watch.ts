/**
 * Notices when the process that started this one is gone. A stdio server's
 * parent is its client (or a launcher such as `deno task` between them);
 * when the parent dies the kernel re-parents the server (to init or a
 * subreaper), so a changed parent pid means nobody will read the answers.
 *
 * @module
 */

/** Options of {@link watchParent}. */
export interface ParentWatchOptions {
  /** How often to look, in milliseconds (default 1000). */
  intervalMs?: number;
  /** Reads the parent pid (default `Deno.ppid`); a test seam. */
  parentPid?: () => number;
}

/** A running watch. */
export interface ParentWatch {
  /** Stops watching. */
  stop(): void;
}

/**
 * Calls `onGone` once, with the old and new parent pids, when the parent
 * pid changes. The timer does not keep the process alive.
 */
export function watchParent(
  onGone: (was: number, now: number) => void,
  options: ParentWatchOptions = {},
): ParentWatch {
  const read = options.parentPid ?? (() => Deno.ppid);
  const start = read();
  const timer = setInterval(() => {
    const now = read();
    if (now !== start) {
      clearInterval(timer);
      onGone(start, now);
    }
  }, options.intervalMs ?? 1000);
  Deno.unrefTimer(timer);
  return { stop: () => clearInterval(timer) };
}
