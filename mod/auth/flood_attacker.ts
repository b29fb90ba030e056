/**
 * The attacker of auth_flood_bench.ts, run as a Worker so that its HTTP
 * client work happens on another thread, as a remote attacker's would, not
 * on the server's event loop. On `{ type: "start", … }` it keeps
 * `concurrency` wrong-secret `tools/list` requests for `prefix` in flight,
 * reading every answer; on `{ type: "stop" }` it finishes the requests in
 * flight and posts `{ type: "done", statuses }` (HTTP status → count).
 *
 * @module
 */

import { timeToolsList } from "../../tests/helpers/tools_list_bench.ts";
import { randomBase62 } from "./api_key.ts";

/** What the bench sends to start the attack. */
export interface AttackStart {
  /** Discriminant. */
  type: "start";
  /** `http://127.0.0.1:<port>/mcp`. */
  url: string;
  /** The right `X-MCP-Token`: the attacker is a tenant behind the CDN. */
  token: string;
  /** The existing key prefix attacked. */
  prefix: string;
  /** Requests in flight. */
  concurrency: number;
}

let running = false;
const statuses: Record<number, number> = {};
const loops: Promise<void>[] = [];

async function attackLoop(start: AttackStart): Promise<void> {
  while (running) {
    try {
      const { status } = await timeToolsList(start.url, {
        "x-mcp-token": start.token,
        "mcp-api-key": `guinness_${start.prefix}_${randomBase62(43)}`,
      });
      statuses[status] = (statuses[status] ?? 0) + 1;
    } catch {
      statuses[0] = (statuses[0] ?? 0) + 1;
    }
  }
}

const scope = self as unknown as {
  onmessage: ((event: MessageEvent) => void) | null;
  postMessage(message: unknown): void;
  close(): void;
};
scope.onmessage = async (event: MessageEvent) => {
  const message = event.data as AttackStart | { type: "stop" };
  if (message.type === "start") {
    running = true;
    for (let i = 0; i < message.concurrency; i++) loops.push(attackLoop(message));
    scope.postMessage({ type: "started" });
  } else {
    running = false;
    await Promise.all(loops);
    scope.postMessage({ type: "done", statuses });
    scope.close();
  }
};
