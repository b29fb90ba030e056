/**
 * Application wiring.
 *
 * @module
 */

export { startApp } from "./app.ts";
export type { App, AppOverrides } from "./app.ts";
