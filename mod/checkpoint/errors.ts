/**
 * The one error type of checkpoint reading.
 *
 * @module
 */

/**
 * A weights file or folder that cannot be read as asked. The message is one
 * line naming the file, what was found in it and what is supported, so the
 * CLI can print it as it is.
 */
export class CheckpointError extends Error {
  /** Creates an error with a complete one-line message. */
  constructor(message: string) {
    super(message);
    this.name = "CheckpointError";
  }
}
