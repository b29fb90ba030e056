/**
 * Real SDK clients connected in memory to servers built by
 * `createMcpServer`, for the unit tests of this folder: a v2 client in the
 * 2025 era (`initialize`), a v2 client pinned to 2026-07-28 through the
 * SDK's `serveStdio` entry (the era is the entry's to decide), and a v1
 * 1.32 client.
 *
 * @module
 */

import { Client, ClientV2, InMemoryTransport, InMemoryTransportV1 } from "./client_sdk.ts";
import { type McpServer, type McpTransport, serveStdio } from "./sdk.ts";
import type { ProtocolEra } from "./tasks.ts";

/** A connected client and how to close it (with its server). */
export interface Connected<C> {
  client: C;
  close(): Promise<void>;
}

/** A v2 client speaking the 2025 era (`initialize`) to `server`. */
export async function connectLegacy(
  server: McpServer,
  capabilities: Record<string, unknown> = {},
): Promise<Connected<ClientV2>> {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide as McpTransport);
  const client = new ClientV2({ name: "unit", version: "1" }, { capabilities });
  await client.connect(clientSide);
  return { client, close: () => client.close() };
}

/**
 * A v2 client pinned to 2026-07-28 (`server/discover`, the `_meta`
 * envelope on every request), served by `serveStdio` over an in-memory
 * wire: `build` gets the era the entry asks for.
 */
export async function connectModern(
  build: (era: ProtocolEra) => McpServer,
  capabilities: Record<string, unknown> = {},
): Promise<Connected<ClientV2>> {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const handle = serveStdio(({ era }) => build(era), { transport: serverSide as McpTransport });
  const client = new ClientV2({ name: "unit", version: "1" }, {
    capabilities,
    versionNegotiation: { mode: { pin: "2026-07-28" } },
  });
  await client.connect(clientSide);
  return {
    client,
    async close() {
      await client.close();
      await handle.close();
    },
  };
}

/** A v1 1.32 client (2025-11-25 and earlier) connected to `server`. */
export async function connectV1(
  server: McpServer,
  capabilities: Record<string, unknown> = {},
): Promise<Connected<Client>> {
  const [clientSide, serverSide] = InMemoryTransportV1.createLinkedPair();
  await server.connect(serverSide as unknown as McpTransport);
  const client = new Client({ name: "unit", version: "1" }, { capabilities });
  await client.connect(clientSide);
  return { client, close: () => client.close() };
}
