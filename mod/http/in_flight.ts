/**
 * 2025-era requests in flight over stateless HTTP, so that
 * `notifications/cancelled` can reach them, and only from the client that
 * sent them. (A 2026-07-28 client cancels by closing the request's stream,
 * and has no session id: nothing of it is registered here.)
 *
 * A stateless server handles every POST with a new MCP server, so the
 * cancellation a client sends for request N arrives at a server that never
 * saw N. This registry remembers each running request by its owner and its
 * JSON-RPC id; a cancellation from the same owner aborts it.
 *
 * The owner is the API key plus a client id the server issues: the answer
 * to `initialize` carries an `Mcp-Session-Id` header (128 random bits),
 * which MCP clients send back on every later request (MCP 2025-06-18
 * transports §Session Management). The server keeps no session state; the
 * id only tells two clients of one key apart, so one cannot cancel the
 * other's request by reusing its JSON-RPC id (ids are chosen by clients and
 * collide: every SDK client counts from 0). A request without a client id
 * is not registered: it cannot be cancelled by notification, and closing
 * its response stream is a disconnect, not a cancellation (MCP 2025-11-25),
 * so its job is stopped with `cancel_generation`. An ambiguous owner + id
 * (two live requests) is left alone rather than guessed.
 *
 * @module
 */

/** The header carrying the server-issued client id. */
export const SESSION_HEADER = "mcp-session-id";

/** A new client id: 32 lowercase hex digits (128 random bits). */
export function newClientId(): string {
  return crypto.randomUUID().replaceAll("-", "");
}

/** The client id a request carries, or null when it has none of the issued shape. */
export function clientIdOf(request: Request): string | null {
  const value = request.headers.get(SESSION_HEADER);
  return value !== null && /^[0-9a-f]{32}$/.test(value) ? value : null;
}

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
