/**
 * The streamable HTTP transport.
 *
 * @module
 */

export { startHttpServer } from "./server.ts";
export {
  DEFAULT_CONNECTION_LIMITS,
  type GuardedServeOptions,
  type GuardedServer,
  serveGuarded,
} from "./guarded_serve.ts";
export { ConnectionGuard, MAX_HEAD_BYTES } from "./connection_guard.ts";
export { CLIENT_ADDRESS_HEADER } from "./request_head.ts";
export {
  type AddressRange,
  AddressSet,
  clientAddress,
  clientKey,
  type ForwardedHeader,
  parseAddressRange,
} from "./client_address.ts";
export {
  DATABASE_UNAVAILABLE,
  type DatabaseState,
  databaseUnavailableReason,
  gatherHealth,
  type GatherHealthOptions,
  type HealthFields,
  healthResponse,
  withDatabase,
} from "./health.ts";
export type { ConnectionGuardOptions, ConnectionLimits } from "./connection_guard.ts";
export type { RefusalStats } from "./refusal.ts";
export type { HttpServerHandle, HttpServerOptions, McpCall } from "./server.ts";
export {
  CORS_ALLOW_HEADERS,
  CORS_ALLOW_METHODS,
  CORS_EXPOSE_HEADERS,
  CORS_MAX_AGE_SECONDS,
  CorsPolicy,
  loopbackOrigins,
} from "./cors.ts";
export { startHealthServer } from "./health_server.ts";
export type { HealthServerOptions } from "./health_server.ts";
