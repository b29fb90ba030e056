/**
 * PNG output with text metadata. sharp encodes the pixels; the `tEXt`
 * chunks (PNG specification, W3C 3rd ed., §11.3.3.3: keyword of 1–79
 * Latin-1 characters, a NUL separator, Latin-1 text) are inserted right
 * after IHDR by this module, so no sharp metadata option is involved and
 * every key reaches the file verbatim. The contract's keys are `seed`,
 * `size`, `mode`, `timestamp` and `elapsed_seconds`.
 *
 * @module
 */

import type { RgbImage } from "../pipeline/types.ts";
import { crc32 } from "./crc32.ts";
import { PNG_SIGNATURE } from "./png_header.ts";
import { encodeRawPng } from "./sharp.ts";

/** Offset just past the IHDR chunk: signature 8 + length 4 + type 4 + data 13 + CRC 4. */
const IHDR_END = 33;

/** Checks a tEXt keyword (§11.3.3.3): 1–79 printable Latin-1, no edge or double spaces. */
function checkKeyword(keyword: string): void {
  const ok = keyword.length >= 1 && keyword.length <= 79 &&
    /^[\x20-\x7e\xa1-\xff]+$/.test(keyword) && !keyword.startsWith(" ") &&
    !keyword.endsWith(" ") && !keyword.includes("  ");
  if (!ok) {
    throw new RangeError(
      `PNG tEXt keyword ${
        JSON.stringify(keyword)
      } is invalid: 1-79 printable Latin-1 characters, no leading, trailing or double spaces`,
    );
  }
}

/**
 * Builds one PNG chunk: length, type, data, CRC-32 over type + data (§5.3).
 *
 * @param type The four-letter chunk type, e.g. `"tEXt"`.
 * @param data The chunk's data.
 * @returns The whole chunk, ready to splice into a PNG stream.
 */
export function pngChunk(type: string, data: Uint8Array): Uint8Array {
  const out = new Uint8Array(12 + data.length);
  const view = new DataView(out.buffer);
  view.setUint32(0, data.length);
  for (let i = 0; i < 4; i++) out[4 + i] = type.charCodeAt(i);
  out.set(data, 8);
  view.setUint32(8 + data.length, crc32(out.subarray(4, 8 + data.length)));
  return out;
}

/** Encodes a tEXt chunk; throws `RangeError` for a bad keyword or non-Latin-1 text. */
function textChunk(keyword: string, text: string): Uint8Array {
  checkKeyword(keyword);
  const data = new Uint8Array(keyword.length + 1 + text.length);
  for (let i = 0; i < keyword.length; i++) data[i] = keyword.charCodeAt(i);
  data[keyword.length] = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code === 0 || code > 0xff) {
      throw new RangeError(
        `PNG tEXt value of ${JSON.stringify(keyword)} has character U+${
          code.toString(16).toUpperCase().padStart(4, "0")
        } at index ${i}; tEXt holds Latin-1 text without NUL`,
      );
    }
    data[keyword.length + 1 + i] = code;
  }
  return pngChunk("tEXt", data);
}

/** Whether `text` fits a tEXt chunk: Latin-1 without NUL. */
function isLatin1(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code === 0 || code > 0xff) return false;
  }
  return true;
}

/**
 * Encodes an iTXt chunk (§11.3.3.4) for text outside Latin-1 (a prompt in
 * any script): keyword, NUL, compression flag 0 and method 0, empty
 * language tag and translated keyword (each NUL-ended), then the UTF-8 text.
 * NUL, which the text may not hold, becomes U+FFFD.
 */
function internationalTextChunk(keyword: string, text: string): Uint8Array {
  checkKeyword(keyword);
  const utf8 = new TextEncoder().encode(text.replaceAll("\u0000", "\uFFFD"));
  const data = new Uint8Array(keyword.length + 5 + utf8.length);
  for (let i = 0; i < keyword.length; i++) data[i] = keyword.charCodeAt(i);
  // data[keyword.length .. +4] stay 0: NUL, flag, method, language tag NUL, translated NUL.
  data.set(utf8, keyword.length + 5);
  return pngChunk("iTXt", data);
}

/**
 * Encodes `image` as an 8-bit RGB PNG and inserts one text chunk per entry
 * of `text`, in insertion order, right after IHDR: `tEXt` for Latin-1
 * values, `iTXt` (UTF-8) for the others. Throws `RangeError` for a
 * malformed image or an invalid keyword.
 */
export async function encodePng(
  image: RgbImage,
  text: Record<string, string>,
): Promise<Uint8Array> {
  if (image.data.length !== image.width * image.height * 3 || image.width < 1 || image.height < 1) {
    throw new RangeError(
      `encodePng: image is ${image.width}×${image.height} but has ${image.data.length} bytes`,
    );
  }
  const chunks = Object.entries(text).map(([key, value]) =>
    isLatin1(value) ? textChunk(key, value) : internationalTextChunk(key, value)
  );
  const png = await encodeRawPng({ ...image, channels: 3 });
  if (String.fromCharCode(...png.subarray(12, 16)) !== "IHDR") {
    throw new Error("encodePng: the encoder's output does not start with IHDR");
  }
  const extra = chunks.reduce((sum, c) => sum + c.length, 0);
  const out = new Uint8Array(png.length + extra);
  out.set(png.subarray(0, IHDR_END), 0);
  let at = IHDR_END;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  out.set(png.subarray(IHDR_END), at);
  return out;
}

/**
 * Reads every `tEXt` chunk (Latin-1) and uncompressed `iTXt` chunk (UTF-8)
 * of a PNG into a record (keyword → text; a repeated keyword keeps its
 * first value). Throws `Error` if the bytes are
 * not a PNG, a chunk runs past the end, or a tEXt chunk's CRC is wrong.
 */
export function readPngText(bytes: Uint8Array): Record<string, string> {
  for (let i = 0; i < 8; i++) {
    if (bytes[i] !== PNG_SIGNATURE[i]) throw new Error("readPngText: not a PNG signature");
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const result: Record<string, string> = {};
  let at = 8;
  while (at + 12 <= bytes.length) {
    const length = view.getUint32(at);
    const type = String.fromCharCode(...bytes.subarray(at + 4, at + 8));
    const end = at + 12 + length;
    if (end > bytes.length) {
      throw new Error(`readPngText: chunk ${type} at offset ${at} runs past the end`);
    }
    if (type === "tEXt") {
      const stored = view.getUint32(at + 8 + length);
      const computed = crc32(bytes.subarray(at + 4, at + 8 + length));
      if (stored !== computed) {
        throw new Error(
          `readPngText: tEXt chunk at offset ${at} has CRC 0x${stored.toString(16)}, data gives 0x${
            computed.toString(16)
          }`,
        );
      }
      const data = bytes.subarray(at + 8, at + 8 + length);
      const nul = data.indexOf(0);
      if (nul < 1) throw new Error(`readPngText: tEXt chunk at offset ${at} has no keyword`);
      const latin1 = (part: Uint8Array) => Array.from(part, (b) => String.fromCharCode(b)).join("");
      const key = latin1(data.subarray(0, nul));
      if (!(key in result)) result[key] = latin1(data.subarray(nul + 1));
    }
    if (type === "iTXt") {
      const data = bytes.subarray(at + 8, at + 8 + length);
      const nul = data.indexOf(0);
      if (nul < 1) throw new Error(`readPngText: iTXt chunk at offset ${at} has no keyword`);
      const key = Array.from(data.subarray(0, nul), (b) => String.fromCharCode(b)).join("");
      const language = data.indexOf(0, nul + 3);
      const translated = language < 0 ? -1 : data.indexOf(0, language + 1);
      if (data[nul + 1] !== 0 || translated < 0) {
        throw new Error(`readPngText: iTXt chunk at offset ${at} is compressed or malformed`);
      }
      if (!(key in result)) result[key] = new TextDecoder().decode(data.subarray(translated + 1));
    }
    if (type === "IEND") break;
    at = end;
  }
  return result;
}
