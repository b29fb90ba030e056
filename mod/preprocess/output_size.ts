/**
 * Validation of the control-image size the pipeline asks for.
 *
 * @module
 */

/** Rejects an output size that is not two positive integers (a caller bug, not user input). */
export function checkOutputSize(width: number, height: number): void {
  if (!Number.isInteger(width) || !Number.isInteger(height) || width < 1 || height < 1) {
    throw new RangeError(`output size must be positive integers, got ${width}x${height}`);
  }
}
