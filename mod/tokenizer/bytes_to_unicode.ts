/**
 * GPT-2 / CLIP byte-to-unicode table.
 *
 * Source: openai/CLIP `clip/simple_tokenizer.py` `bytes_to_unicode()` (same as
 * openai/gpt-2 `src/encoder.py`). Printable Latin-1 bytes map to themselves;
 * the other 68 bytes map to code points 256, 257, … in byte order, so every
 * byte becomes one visible, non-whitespace character that BPE can merge.
 *
 * @module
 */

/** One byte and the character that stands for it, in the table's own order. */
export interface ByteUnicodePair {
  /** The byte value 0..255. */
  byte: number;
  /** The single character that represents the byte. */
  char: string;
}

/**
 * Returns the 256 byte/character pairs in the insertion order of the Python
 * dict (printable ranges first, then the remaining bytes ascending). That order
 * defines CLIP vocabulary ids 0..255 (and 256..511 with the `</w>` suffix).
 */
export function bytesToUnicode(): ByteUnicodePair[] {
  const bs: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) bs.push(b); // "!".."~"
  for (let b = 0xa1; b <= 0xac; b++) bs.push(b); // "¡".."¬"
  for (let b = 0xae; b <= 0xff; b++) bs.push(b); // "®".."ÿ"
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n);
      n++;
    }
  }
  return bs.map((byte, i) => ({ byte, char: String.fromCodePoint(cs[i]) }));
}
