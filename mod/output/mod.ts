/**
 * Output naming and saving.
 *
 * @module
 */

export { compactUtcTimestamp, imageFileName, MAX_NAME_LENGTH, sanitizeName } from "./file_name.ts";
export { savePng, shownPath } from "./save.ts";
