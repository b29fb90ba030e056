/**
 * A linear, non-recursive scan of JSON text for its nesting depth, run on
 * backend answers before `JSON.parse` (bounded work per answer).
 * It only counts brackets outside strings; it does not validate.
 *
 * @module
 */

/**
 * True when `text` opens more than `maxDepth` arrays/objects inside each
 * other. Brackets inside strings (with `\"` escapes) do not count.
 *
 * @param text JSON text.
 * @param maxDepth Deepest nesting allowed.
 * @returns Whether the nesting is deeper.
 */
export function jsonNestingExceeds(text: string, maxDepth: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > maxDepth) return true;
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
  return false;
}
