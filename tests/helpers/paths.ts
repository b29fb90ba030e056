/**
 * Paths shared by the end-to-end tests.
 *
 * @module
 */

import { fileURLToPath } from "node:url";

/** The repository root. */
export const ROOT: string = fileURLToPath(new URL("../../", import.meta.url));

/** The tiny model set's config. */
export const TINY_CONFIG: string = `${ROOT}tests/fixtures/tiny/config.toml`;
