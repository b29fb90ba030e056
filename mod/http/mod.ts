/**
 * The streamable HTTP transport.
 *
 * @module
 */

export { startHttpServer } from "./server.ts";
export type { HttpServerHandle, HttpServerOptions } from "./server.ts";
export { startHealthServer } from "./health_server.ts";
export type { HealthServerOptions } from "./health_server.ts";
