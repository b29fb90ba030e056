/**
 * Names of saved images (contract §2.1):
 * `{name}_{YYYYMMDD_HHMMSS}_{seed}.png`, or without the name prefix.
 *
 * @module
 */

/** Longest name prefix kept after sanitizing. */
export const MAX_NAME_LENGTH = 64;

/**
 * Sanitizes a user label: every character outside `[A-Za-z0-9_-]` becomes
 * `_`, the result is cut to 64 characters, and a result with no letter or
 * digit means "no prefix" (null).
 */
export function sanitizeName(name: string | null | undefined): string | null {
  if (name === null || name === undefined) return null;
  // Iterate code points so a surrogate pair becomes one "_", not two.
  const cleaned = Array.from(name, (ch) => /^[A-Za-z0-9_-]$/.test(ch) ? ch : "_").join("")
    .slice(0, MAX_NAME_LENGTH);
  return /[A-Za-z0-9]/.test(cleaned) ? cleaned : null;
}

/** `YYYYMMDD_HHMMSS` in UTC. */
export function compactUtcTimestamp(date: Date): string {
  const p = (n: number, w = 2) => String(n).padStart(w, "0");
  return `${p(date.getUTCFullYear(), 4)}${p(date.getUTCMonth() + 1)}${p(date.getUTCDate())}_` +
    `${p(date.getUTCHours())}${p(date.getUTCMinutes())}${p(date.getUTCSeconds())}`;
}

/** The file name for an image, before collision handling. */
export function imageFileName(name: string | null, date: Date, seed: number): string {
  const stem = `${compactUtcTimestamp(date)}_${seed}`;
  return name ? `${name}_${stem}.png` : `${stem}.png`;
}
