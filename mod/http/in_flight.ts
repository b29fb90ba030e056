/**
 * Requests in flight over stateless HTTP, so that `notifications/cancelled`
 * can reach them.
 *
 * A stateless server handles every POST with a new MCP server, so the
 * cancellation a client sends for request N arrives at a server that never
 * saw N. This registry remembers each running request by the API key that
 * sent it and its JSON-RPC id; a cancellation from the same key aborts it.
 * Ids are chosen by clients and two clients sharing a key may reuse one, so
 * an ambiguous id (two live requests) is left alone rather than guessed.
 *
 * @module
 */

/** One registered request; `release` must be called when it ends. */
export interface InFlightEntry {
  release(): void;
}

type Id = string | number;

/** See the module documentation. */
export class InFlightRequests {
  #entries = new Map<string, Set<() => void>>();

  static #key(owner: string, id: Id): string {
    return `${owner}\u0000${typeof id}:${id}`;
  }

  /** Registers request `id` of `owner`; `cancel` is called if it is cancelled. */
  register(owner: string, id: Id, cancel: () => void): InFlightEntry {
    const key = InFlightRequests.#key(owner, id);
    let set = this.#entries.get(key);
    if (!set) this.#entries.set(key, set = new Set());
    set.add(cancel);
    return {
      release: () => {
        set!.delete(cancel);
        if (set!.size === 0 && this.#entries.get(key) === set) this.#entries.delete(key);
      },
    };
  }

  /**
   * Cancels request `id` of `owner` when exactly one such request is live.
   *
   * @returns whether a request was cancelled
   */
  cancel(owner: string, id: Id): boolean {
    const set = this.#entries.get(InFlightRequests.#key(owner, id));
    if (!set || set.size !== 1) return false;
    const [cancel] = set;
    cancel();
    return true;
  }

  /** How many requests are registered (for tests and health). */
  get size(): number {
    let n = 0;
    for (const set of this.#entries.values()) n += set.size;
    return n;
  }
}

/** The JSON-RPC messages of a body (one message, or a legacy batch). */
export function jsonRpcMessages(body: unknown): Array<Record<string, unknown>> {
  const list = Array.isArray(body) ? body : [body];
  return list.filter((m): m is Record<string, unknown> => m !== null && typeof m === "object");
}
