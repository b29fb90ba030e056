/**
 * A `tools/list` flood run as a Worker, so that its HTTP client work
 * happens on another thread, as a remote attacker's would, not on the event
 * loop of the server or of the client it is measured against. Used by
 * auth_flood_bench.ts (wrong secrets for one prefix), the fair-share test
 * (tests/fair_share_http_test.ts) and bench (mod/http/fair_share_bench.ts).
 *
 * On `{ type: "start", … }` it keeps `concurrency` `tools/list` requests in
 * flight, reading every answer; on `{ type: "stop" }` it finishes the
 * requests in flight and posts `{ type: "done", statuses }` (HTTP status →
 * count; 0: no answer could be read).
 *
 * @module
 */

import { requestFrom } from "../tests/helpers/from_address.ts";
import { timeToolsList } from "../tests/helpers/tools_list_bench.ts";
import { PREFIX_LENGTH, randomBase62, SECRET_LENGTH } from "../mod/auth/api_key.ts";

/** What the key header of each request carries. */
export type FloodCredential =
  /** `guinness_<prefix>_<random secret>`: wrong secrets for an existing prefix. */
  | { kind: "wrong-secret"; prefix: string }
  /** `guinness_<random prefix>_<random secret>`: well-formed keys no database holds. */
  | { kind: "unknown-prefix" }
  /** A valid key. */
  | { kind: "valid"; key: string };

/** What the bench sends to start the attack. */
export interface AttackStart {
  /** Discriminant. */
  type: "start";
  /** `http://127.0.0.1:<port>/mcp`. */
  url: string;
  /** The right `X-MCP-Token`, when the server asks for one (the attacker is a tenant behind the CDN). */
  token?: string;
  /** The existing key prefix attacked with wrong secrets (when `credentials` is not given). */
  prefix?: string;
  /**
   * The credentials, by loop: loop `i` uses `credentials[i % length]`
   * (default: wrong secrets for `prefix`).
   */
  credentials?: FloodCredential[];
  /** Requests in flight. */
  concurrency: number;
  /**
   * Loopback addresses to send from, by loop (`from[i % length]`), over raw
   * HTTP/1.1 (`node:net` can bind a local address; `fetch` cannot). Without
   * it, `fetch` from the address the system picks.
   */
  from?: string[];
}

/** What the worker posts when stopped. */
export interface AttackDone {
  /** Discriminant. */
  type: "done";
  /** HTTP status → how many requests got it (0: no answer could be read). */
  statuses: Record<number, number>;
}

let running = false;
const statuses: Record<number, number> = {};
const loops: Promise<void>[] = [];

function keyOf(credential: FloodCredential): string {
  switch (credential.kind) {
    case "valid":
      return credential.key;
    case "wrong-secret":
      return `guinness_${credential.prefix}_${randomBase62(SECRET_LENGTH)}`;
    case "unknown-prefix":
      return `guinness_${randomBase62(PREFIX_LENGTH)}_${randomBase62(SECRET_LENGTH)}`;
  }
}

const LIST_TOOLS = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" });

async function attackLoop(start: AttackStart, index: number): Promise<void> {
  const credentials = start.credentials ?? [{ kind: "wrong-secret", prefix: start.prefix ?? "" }];
  const credential = credentials[index % credentials.length];
  const from = start.from?.[index % start.from.length];
  const port = Number(new URL(start.url).port);
  while (running) {
    const headers: Record<string, string> = {
      ...(start.token === undefined ? {} : { "x-mcp-token": start.token }),
      "mcp-api-key": keyOf(credential),
    };
    let status = 0;
    try {
      if (from === undefined) {
        status = (await timeToolsList(start.url, headers)).status;
      } else {
        status = (await requestFrom(from, port, {
          method: "POST",
          path: "/mcp",
          headers: {
            "content-type": "application/json",
            accept: "application/json, text/event-stream",
            ...headers,
          },
          body: LIST_TOOLS,
        }, 10_000)).status;
      }
    } catch {
      status = 0;
    }
    statuses[status] = (statuses[status] ?? 0) + 1;
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
    for (let i = 0; i < message.concurrency; i++) loops.push(attackLoop(message, i));
    scope.postMessage({ type: "started" });
  } else {
    running = false;
    await Promise.all(loops);
    scope.postMessage({ type: "done", statuses } satisfies AttackDone);
    scope.close();
  }
};
