/**
 * The one error every config step throws: its message already names the file
 * and the key, so callers print it as it is.
 *
 * @module
 */

/** A config problem: names the file and the key. */
export class ConfigError extends Error {
  /** Creates an error whose message already names file and key. */
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}
