/**
 * The streamable HTTP transport.
 *
 * @module
 */

export { startHttpServer } from "./server.ts";
export type { HttpServerHandle, HttpServerOptions } from "./server.ts";
