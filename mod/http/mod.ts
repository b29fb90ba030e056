/**
 * The streamable HTTP transport.
 *
 * @module
 */

export { startHttpServer } from "./server.ts";
export type { HttpServerHandle, HttpServerOptions } from "./server.ts";
export {
  CORS_ALLOW_HEADERS,
  CORS_ALLOW_METHODS,
  CORS_EXPOSE_HEADERS,
  CORS_MAX_AGE_SECONDS,
  CorsPolicy,
  loopbackOrigins,
} from "./cors.ts";
