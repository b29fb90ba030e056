/**
 * The program's name and version, from `deno.json` (embedded in a compiled
 * binary as a JSON module, so `--version` needs no file on disk).
 *
 * @module
 */

import manifest from "../../deno.json" with { type: "json" };

/** The program's name, as the binary and the MCP server info call it. */
export const PROGRAM_NAME = "generate-image-sd15-mcp";

/** The version in `deno.json`. */
export const PROGRAM_VERSION: string = manifest.version;

/** One line for `--version`: the program, its version and the Deno runtime it runs on. */
export function versionLine(): string {
  return `${PROGRAM_NAME} ${PROGRAM_VERSION} (deno ${Deno.version.deno}, v8 ${Deno.version.v8})`;
}
