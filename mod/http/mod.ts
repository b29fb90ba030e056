/**
 * The streamable HTTP transport.
 *
 * @module
 */

export { startHttpServer } from "./server.ts";
export type {
  AuthOutcome,
  HttpServerHandle,
  HttpServerOptions,
  RequestAuthenticator,
} from "./server.ts";
