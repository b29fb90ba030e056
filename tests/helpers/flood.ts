/**
 * Drives the `tools/list` flood of `bench/flood_attacker.ts` (a Worker,
 * so the flood's client work is on its own thread) from a test or bench.
 *
 * @module
 */

import type { AttackDone, AttackStart } from "../../bench/flood_attacker.ts";

/** A running flood. */
export interface Flood {
  /** Stops it once the requests in flight are answered; resolves with HTTP status → count. */
  stop(): Promise<Record<number, number>>;
}

/** Starts a flood of `start` (see {@link AttackStart}); resolves once every loop runs. */
export async function startFlood(start: Omit<AttackStart, "type">): Promise<Flood> {
  const worker = new Worker(
    new URL("../../bench/flood_attacker.ts", import.meta.url),
    { type: "module" },
  );
  const says = (type: string) =>
    new Promise<Record<string, unknown>>((resolve) => {
      const listen = (event: MessageEvent) => {
        if (event.data?.type !== type) return;
        worker.removeEventListener("message", listen);
        resolve(event.data);
      };
      worker.addEventListener("message", listen);
    });
  const started = says("started");
  worker.postMessage({ type: "start", ...start } satisfies AttackStart);
  await started;
  let stopped: Promise<Record<number, number>> | undefined;
  return {
    stop() {
      stopped ??= (async () => {
        const done = says("done");
        worker.postMessage({ type: "stop" });
        const statuses = ((await done) as unknown as AttackDone).statuses;
        worker.terminate();
        return statuses;
      })();
      return stopped;
    },
  };
}

/** `statuses` as `200×12 503×3`, for a log line or an assertion message. */
export function formatStatuses(statuses: Record<number, number>): string {
  return Object.entries(statuses).map(([status, count]) => `${status}×${count}`).join(" ");
}
