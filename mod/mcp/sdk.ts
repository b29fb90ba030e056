/**
 * The one door to the MCP SDK. Its `…/x.js` subpath imports type-check as
 * `any` under Deno unless each is given its declaration file, so they are
 * gathered here with `@ts-types` pointing into `node_modules`.
 *
 * @module
 */

// @ts-types="../../node_modules/@modelcontextprotocol/sdk/dist/esm/server/index.d.ts"
export { Server } from "@modelcontextprotocol/sdk/server/index.js";
// @ts-types="../../node_modules/@modelcontextprotocol/sdk/dist/esm/server/webStandardStreamableHttp.d.ts"
export { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
// @ts-types="../../node_modules/@modelcontextprotocol/sdk/dist/esm/types.d.ts"
export {
  CallToolRequestSchema,
  CallToolResultSchema,
  ErrorCode,
  JSONRPCMessageSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";
// @ts-types="../../node_modules/@modelcontextprotocol/sdk/dist/esm/types.d.ts"
export type {
  CallToolResult,
  JSONRPCMessage,
  ServerNotification,
  ServerRequest,
} from "@modelcontextprotocol/sdk/types.js";
// @ts-types="../../node_modules/@modelcontextprotocol/sdk/dist/esm/shared/transport.d.ts"
export type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
// @ts-types="../../node_modules/@modelcontextprotocol/sdk/dist/esm/shared/protocol.d.ts"
export type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
// @ts-types="../../node_modules/@modelcontextprotocol/sdk/dist/esm/server/index.d.ts"
import type { Server as SdkServer } from "@modelcontextprotocol/sdk/server/index.js";
// @ts-types="../../node_modules/@modelcontextprotocol/sdk/dist/esm/shared/transport.d.ts"
import type { Transport as SdkTransport } from "@modelcontextprotocol/sdk/shared/transport.js";
// @ts-types="../../node_modules/@modelcontextprotocol/sdk/dist/esm/types.d.ts"
import type { JSONRPCMessage as SdkJsonRpcMessage } from "@modelcontextprotocol/sdk/types.js";

// Bare aliases give the SDK types a documented name of our own, so public
// signatures (`createMcpServer`, `DenoStdioTransport`, the HTTP options) can
// name them without `deno doc` counting them as private third-party types.
/** The SDK's low-level MCP `Server` (one per stdio session or HTTP request). */
export type McpServer = SdkServer;
/** The SDK's transport interface: what {@link McpServer.connect} drives. */
export type McpTransport = SdkTransport;
/** One JSON-RPC 2.0 message (request, notification or response) as the SDK types it. */
export type McpMessage = SdkJsonRpcMessage;
// @ts-types="../../node_modules/@modelcontextprotocol/sdk/dist/esm/client/index.d.ts"
export { Client } from "@modelcontextprotocol/sdk/client/index.js";
// @ts-types="../../node_modules/@modelcontextprotocol/sdk/dist/esm/client/stdio.d.ts"
export { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
// @ts-types="../../node_modules/@modelcontextprotocol/sdk/dist/esm/client/streamableHttp.d.ts"
export { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
// @ts-types="../../node_modules/@modelcontextprotocol/sdk/dist/esm/inMemory.d.ts"
export { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
