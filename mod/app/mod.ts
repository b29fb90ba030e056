/**
 * Application wiring.
 *
 * @module
 */

export { startApp } from "./app.ts";
export type { App, AppOverrides } from "./app.ts";
export { checkSetup } from "./check.ts";
export { PROGRAM_NAME, PROGRAM_VERSION, versionLine } from "./version.ts";
