/**
 * The one door to the MCP server SDK (`@modelcontextprotocol/server`, the
 * v2 line: the 2026-07-28 revision and the 2025 era from one server
 * definition). Nothing else in the server imports it; the client SDKs the
 * tests and benchmarks drive are behind `client_sdk.ts`.
 *
 * @module
 */

export {
  CLIENT_CAPABILITIES_META_KEY as CLIENT_CAPABILITIES_KEY,
  createMcpHandler,
  isLegacyRequest,
  MissingRequiredClientCapabilityError,
  parseJSONRPCMessage,
  PROTOCOL_VERSION_META_KEY,
  ProtocolError,
  ProtocolErrorCode,
  Server,
} from "@modelcontextprotocol/server";
export { serveStdio } from "@modelcontextprotocol/server/stdio";
import type {
  JSONRPCMessage as SdkJsonRpcMessage,
  JSONRPCRequest as SdkJsonRpcRequest,
  McpHttpHandler as SdkHttpHandler,
  McpRequestContext as SdkRequestContext,
  Server as SdkServer,
  ServerCapabilities as SdkServerCapabilities,
  ServerContext as SdkServerContext,
  Transport as SdkTransport,
  TransportSendOptions as SdkSendOptions,
} from "@modelcontextprotocol/server";

// Bare aliases give the SDK types a documented name of our own, so public
// signatures (`createMcpServer`, `DenoStdioTransport`, the HTTP options) can
// name them without `deno doc` counting them as private third-party types.
/** The SDK's low-level MCP `Server`: one per stdio connection or HTTP request. */
export type McpServer = SdkServer;
/** The capabilities a server advertises (`initialize` / `server/discover`). */
export type McpServerCapabilities = SdkServerCapabilities;
/** The SDK's transport interface: what {@link McpServer.connect} drives. */
export type McpTransport = SdkTransport;
/** Options of one `send` (the request an answer or notification belongs to). */
export type McpSendOptions = SdkSendOptions;
/** One JSON-RPC 2.0 message (request, notification or response) as the SDK types it. */
export type McpMessage = SdkJsonRpcMessage;
/** One JSON-RPC request as the SDK types it. */
export type McpRequest = SdkJsonRpcRequest;
/** What a request handler gets besides its params: the request's id, signal, `_meta` envelope. */
export type McpHandlerContext = SdkServerContext;
/** What the server factory of an entry (HTTP or stdio) gets: the era it serves, the request. */
export type McpFactoryContext = SdkRequestContext;
/** The SDK's HTTP entry: `fetch(request, { authInfo, parsedBody })`. */
export type McpHttpHandler = SdkHttpHandler;
