/**
 * Raw JSON-RPC messages for the tests that speak MCP without the SDK client
 * (a piped stdio child, plain `fetch` POSTs), so each does not spell out the
 * handshake again.
 *
 * @module
 */

/**
 * An MCP `initialize` request (protocol 2025-06-18, no capabilities).
 *
 * @param id The request id.
 * @param clientName `clientInfo.name`, to tell the test's clients apart in logs.
 */
export function initializeRequest(id: number, clientName: string): Record<string, unknown> {
  return {
    jsonrpc: "2.0",
    id,
    method: "initialize",
    params: {
      protocolVersion: "2025-06-18",
      capabilities: {},
      clientInfo: { name: clientName, version: "1" },
    },
  };
}

/** The `notifications/initialized` notification that ends the handshake. */
export const INITIALIZED: Readonly<Record<string, unknown>> = {
  jsonrpc: "2.0",
  method: "notifications/initialized",
};

/**
 * Newline-delimited JSON, as the stdio transport frames messages.
 *
 * @param messages The messages, in order.
 * @returns One JSON line per message, each ending in `\n`.
 */
export function jsonLines(messages: readonly unknown[]): string {
  return messages.map((m) => JSON.stringify(m) + "\n").join("");
}
