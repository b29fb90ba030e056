/**
 * The one door to the MCP client SDKs, for the tests and benchmarks that
 * drive the server as its users' clients do; the server never imports it.
 *
 * - v2 (`@modelcontextprotocol/client`): the 2026-07-28 revision or the
 *   2025 era, as its `versionNegotiation` says.
 * - v1 1.32 (`@modelcontextprotocol/sdk`), the last v1 release line: what
 *   most clients in use are built on (2025-11-25 and earlier).
 * - v1 1.0: the first stable client (2024-11-05; stdio only, since it
 *   predates streamable HTTP).
 *
 * v1's `…/x.js` subpath imports type-check as `any` under Deno unless each
 * is given its declaration file, hence the `@ts-types` lines.
 *
 * @module
 */

export { Client as ClientV2 } from "@modelcontextprotocol/client";
export type { ClientOptions as ClientV2Options } from "@modelcontextprotocol/client";
export {
  InMemoryTransport,
  StreamableHTTPClientTransport as StreamableHTTPClientTransportV2,
} from "@modelcontextprotocol/client";
export { StdioClientTransport as StdioClientTransportV2 } from "@modelcontextprotocol/client/stdio";

// @ts-types="../../node_modules/@modelcontextprotocol/sdk/dist/esm/client/index.d.ts"
export { Client } from "@modelcontextprotocol/sdk/client/index.js";
// @ts-types="../../node_modules/@modelcontextprotocol/sdk/dist/esm/client/stdio.d.ts"
export { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
// @ts-types="../../node_modules/@modelcontextprotocol/sdk/dist/esm/client/streamableHttp.d.ts"
export { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
// @ts-types="../../node_modules/@modelcontextprotocol/sdk/dist/esm/inMemory.d.ts"
export { InMemoryTransport as InMemoryTransportV1 } from "@modelcontextprotocol/sdk/inMemory.js";
// @ts-types="../../node_modules/@modelcontextprotocol/sdk/dist/esm/types.d.ts"
export { CallToolResultSchema, McpError } from "@modelcontextprotocol/sdk/types.js";

// @ts-types="../../node_modules/.deno/@modelcontextprotocol+sdk@1.0.4/node_modules/@modelcontextprotocol/sdk/dist/client/index.d.ts"
export { Client as ClientV1_0 } from "@modelcontextprotocol/sdk-1.0/client/index.js";
// @ts-types="../../node_modules/.deno/@modelcontextprotocol+sdk@1.0.4/node_modules/@modelcontextprotocol/sdk/dist/client/stdio.d.ts"
export { StdioClientTransport as StdioClientTransportV1_0 } from "@modelcontextprotocol/sdk-1.0/client/stdio.js";
