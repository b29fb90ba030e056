/**
 * Start-up work a stop abandons. SIGTERM or SIGINT while the models are
 * checked, converted, merged or opened ends the process within the shutdown
 * grace, without waiting for that work: a conversion of the full-size UNet
 * takes minutes and cannot be interrupted inside a tensor, and ONNX Runtime
 * cannot be interrupted while it creates a session. What must not outlive
 * the process is a half-written cache, so every derived build writes into a
 * scratch folder (`derived.ts`) that this module tracks: {@link untilAborted}
 * lets a build's caller stop waiting at once (the build removes its scratch
 * folder), and {@link removeUnfinishedBuilds} removes, synchronously and just
 * before the process exits, every scratch folder a build abandoned this way
 * may still have written into. A finished build is a complete folder with its
 * record, moved into place in one rename: it is kept. Scratch folders of a
 * process that was killed outright (SIGKILL) are removed by the next build
 * of the same folder (their process is gone).
 *
 * @module
 */

/** Scratch folders of builds this process started and has not finished or removed. */
const unfinished = new Set<string>();

/** Records that a build writes into `scratch` until {@link buildDone} is called. */
export function buildStarted(scratch: string): void {
  unfinished.add(scratch);
}

/** The build of `scratch` finished (its folder was moved into place) or was removed for good. */
export function buildDone(scratch: string): void {
  unfinished.delete(scratch);
}

/**
 * Removes the scratch folders of builds that did not finish, synchronously
 * (for the moment before `Deno.exit`); returns those it removed.
 */
export function removeUnfinishedBuilds(): string[] {
  const removed: string[] = [];
  for (const dir of unfinished) {
    try {
      Deno.removeSync(dir, { recursive: true });
      removed.push(dir);
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) continue;
      // Still being written by an abandoned build: the next build sweeps it (its process is gone).
    }
  }
  unfinished.clear();
  return removed;
}

/**
 * `work`, or a rejection with `signal.reason` as soon as `signal` aborts,
 * whichever comes first. The work itself goes on unobserved (its failure is
 * ignored): use it for work that cannot be stopped and need not be awaited,
 * because the process is about to end.
 */
export function untilAborted<T>(work: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return work;
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      work.catch(() => {});
      reject(signal.reason);
    };
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}
