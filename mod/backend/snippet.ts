/**
 * Bounds on backend text that reaches a tool result (without them, a
 * 5,000,000-character JSON error message was copied whole into the tool
 * text). Every backend-supplied string put into a message or summary goes
 * through {@link snippet}; lists of messages through {@link joinSnippets}.
 *
 * @module
 */

/** Longest backend message quoted in a tool text, in characters. */
export const MAX_MESSAGE_CHARS = 500;

/** Most parts of a message list (NestJS `message: []`, FastAPI `detail: []`) quoted. */
export const MAX_MESSAGE_PARTS = 10;

/**
 * `text` with whitespace runs flattened to one space, cut to `max`
 * characters plus `…` and the number of characters left out.
 *
 * @param text Backend text.
 * @param max Longest kept, in characters. @default MAX_MESSAGE_CHARS
 * @returns The snippet.
 */
export function snippet(text: string, max: number = MAX_MESSAGE_CHARS): string {
  // Cut before flattening so a huge string is not copied whole by the regex.
  const head = text.length > max * 2 ? text.slice(0, max * 2) : text;
  const flat = head.replace(/\s+/g, " ");
  if (flat.length <= max && head.length === text.length) return flat;
  const kept = flat.slice(0, max);
  return `${kept}… (${text.length - kept.length} more characters)`;
}

/**
 * The first {@link MAX_MESSAGE_PARTS} parts joined with `"; "`, each a
 * {@link snippet}, the whole cut to `max`, saying when parts were left out
 * (callers pass at most one part more than are shown).
 *
 * @param parts Message parts.
 * @param max Longest result, in characters. @default MAX_MESSAGE_CHARS
 * @returns The joined snippet.
 */
export function joinSnippets(parts: readonly string[], max: number = MAX_MESSAGE_CHARS): string {
  const shown = parts.slice(0, MAX_MESSAGE_PARTS).map((part) => snippet(part, max));
  const joined = shown.join("; ");
  return snippet(joined, max) + (parts.length > shown.length ? " (further messages left out)" : "");
}
