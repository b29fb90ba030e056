/**
 * AUTOMATIC1111's prompt emphasis syntax, read as its `parse_prompt_attention` reads it
 * (AUTOMATIC1111/stable-diffusion-webui `modules/prompt_parser.py`, read at commit
 * 0674fabd0d82c69c02ff362762815c4536687b95):
 *
 * - `(text)` multiplies the weight of `text` by 1.1, `[text]` divides it by 1.1;
 * - `(text:w)` multiplies it by `w`;
 * - `\(`, `\)`, `\[`, `\]`, `\\` are the literal characters (a lone `\` before anything else
 *   is dropped, as there);
 * - a bracket left open applies to the end of the prompt; a `)` or `]` with nothing open is text;
 * - `BREAK`, a whole word, becomes the marker `["BREAK", -1]` (with the spaces around it removed);
 * - neighbouring runs of exactly equal weight are merged.
 *
 * Python's floats and JavaScript's numbers are both IEEE-754 doubles and the multiplications
 * happen in the same order, so the weights agree to the last bit
 * (`a (((house:1.3))` → `1.5730000000000004`, as in the function's doctests).
 *
 * @module
 */

/** A `(text:w)` weight that is not a number (AUTOMATIC1111's `float()` raises on it too). */
export class PromptSyntaxError extends Error {
  /** Makes the error; `message` says what was wrong, naming the value. */
  constructor(message: string) {
    super(message);
    this.name = "PromptSyntaxError";
  }
}

/** The marker a `BREAK` leaves in {@link parsePromptAttention}'s result. */
export const BREAK_MARKER = "BREAK";

// The alternatives of `re_attention`, in its order (the first that matches wins, in Python's
// `re` and in JavaScript alike): the five escapes, a lone backslash, the openers, `:w)`, the
// closers, a run of plain text, a lone colon.
// Python's `\d` is Unicode-aware for str patterns, hence `\p{Nd}`.
const ATTENTION = /\\\(|\\\)|\\\[|\\\]|\\\\|\\|\(|\[|:([+-]?[.\p{Nd}]+)\)|\)|\]|[^\\()\[\]:]+|:/gu;

// `re_break = \s*\bBREAK\b\s*`. Python's `\b` is Unicode-aware for str patterns (a word
// character is a letter, digit or underscore of any script); JavaScript's `\b` knows only
// ASCII, so the boundary is spelled out with lookarounds.
const BREAK_SPLIT = /\s*(?<![\p{L}\p{N}_])BREAK(?![\p{L}\p{N}_])\s*/su;

/**
 * AUTOMATIC1111 `parse_prompt_attention`: the prompt as `[text, weight]` runs; each `BREAK`
 * as `["BREAK", -1]`. An empty prompt gives `[["", 1]]`.
 *
 * @throws {PromptSyntaxError} when a `(text:w)` weight is not a number (`(a:1.2.3)`).
 */
export function parsePromptAttention(text: string): Array<[string, number]> {
  const res: Array<[string, number]> = [];
  const round: number[] = [];
  const square: number[] = [];
  const multiplyRange = (start: number, multiplier: number) => {
    for (let p = start; p < res.length; p++) res[p][1] *= multiplier;
  };

  for (const m of text.matchAll(ATTENTION)) {
    const piece = m[0];
    const weight = m[1];
    if (piece.startsWith("\\")) {
      res.push([piece.slice(1), 1.0]);
    } else if (piece === "(") {
      round.push(res.length);
    } else if (piece === "[") {
      square.push(res.length);
    } else if (weight !== undefined && round.length > 0) {
      multiplyRange(round.pop()!, parseWeight(weight));
    } else if (piece === ")" && round.length > 0) {
      multiplyRange(round.pop()!, 1.1);
    } else if (piece === "]" && square.length > 0) {
      multiplyRange(square.pop()!, 1 / 1.1);
    } else {
      piece.split(BREAK_SPLIT).forEach((part, i) => {
        if (i > 0) res.push([BREAK_MARKER, -1]);
        res.push([part, 1.0]);
      });
    }
  }
  // Brackets left open: round ones first, then square, as there (the order of the factors can
  // change a weight's last bit, and equal weights merge below).
  for (const pos of round) multiplyRange(pos, 1.1);
  for (const pos of square) multiplyRange(pos, 1 / 1.1);

  if (res.length === 0) res.push(["", 1.0]);

  for (let i = 0; i + 1 < res.length;) {
    if (res[i][1] === res[i + 1][1]) {
      res[i][0] += res[i + 1][0];
      res.splice(i + 1, 1);
    } else {
      i++;
    }
  }
  return res;
}

/** Python's `float()` on what `[+-]?[.\d]+` matched: a number, or an error naming it. */
function parseWeight(text: string): number {
  // Number() accepts exactly the forms float() accepts here ("1.", ".5", "+.5") and gives NaN
  // for the ones it refuses ("1.2.3", ".").
  const value = Number(asciiDigits(text));
  if (Number.isNaN(value)) {
    throw new PromptSyntaxError(
      `prompt weight "${text}" in "(text:${text})" is not a number; write it like (text:1.2)`,
    );
  }
  return value;
}

/** True for the `["BREAK", -1]` marker of {@link parsePromptAttention} (not the text "BREAK"). */
export function isBreak(run: readonly [string, number]): boolean {
  return run[0] === BREAK_MARKER && run[1] === -1;
}

/**
 * Python's `float()` reads the decimal digits of every script (`float("١.٥")` is 1.5). Unicode
 * keeps each script's digits 0–9 as one contiguous run of ten code points, with runs of
 * different scripts at times adjacent, so a digit's value is its distance from the start of
 * its run of Nd characters, modulo 10.
 */
function asciiDigits(text: string): string {
  let out = "";
  for (const ch of text) {
    if (ch >= "0" && ch <= "9" || !/\p{Nd}/u.test(ch)) {
      out += ch;
      continue;
    }
    let cp = ch.codePointAt(0)!;
    let k = 0;
    while (/\p{Nd}/u.test(String.fromCodePoint(cp - 1))) {
      cp--;
      k++;
    }
    out += String(k % 10);
  }
  return out;
}
