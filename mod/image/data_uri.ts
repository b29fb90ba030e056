/**
 * Splits an image input string into its declared format (from a data URI)
 * and its base64 payload. Accepted forms (contract §2): raw base64, or
 * `data:image/png;base64,`, `data:image/jpeg;base64,`, `data:image/jpg;base64,`
 * followed by base64.
 *
 * The prefix is matched case-insensitively (`DATA:IMAGE/PNG;BASE64,` is
 * accepted): RFC 2397 data URIs use a URI scheme, a MIME type and the
 * `base64` token, all of which are case-insensitive (RFC 3986 §3.1,
 * RFC 2045 §5.1). Parameters (`;charset=…`) and whitespace are not accepted.
 * The form is unambiguous: raw base64 never contains `:`, so any value that
 * starts with `data:` is treated as a data URI.
 *
 * @module
 */

import { ToolError } from "../mcp/tool.ts";
import type { ImageField, ImageFormat } from "./types.ts";

/** An image input string split into its parts. */
export interface ImageString {
  /** The format the data URI declares, or null for raw base64. */
  declared: ImageFormat | null;
  /** The media type as written in the data URI (e.g. `image/jpg`), or null. */
  declaredType: string | null;
  /** The base64 payload (the whole value for raw base64). */
  payload: string;
}

/** How far into the value the `,` ending a data-URI header is searched for. */
const MAX_HEADER = 256;

const ACCEPTED: Readonly<Record<string, ImageFormat>> = {
  "image/png": "png",
  "image/jpeg": "jpeg",
  "image/jpg": "jpeg",
};

const ACCEPTED_TEXT =
  "only data:image/png;base64, data:image/jpeg;base64, and data:image/jpg;base64, are accepted";

/** Quotes at most `max` characters of `text` for an error message. */
function quote(text: string, max = 80): string {
  return JSON.stringify(text.length > max ? text.slice(0, max) + "…" : text);
}

/**
 * Splits `value` into declared format and base64 payload. Throws a
 * `ToolError("image")` naming `field` for an empty value and for any data URI
 * other than the three accepted forms. Does not look at the payload.
 */
export function splitImageString(field: ImageField, value: string): ImageString {
  if (value.length === 0) {
    throw new ToolError(
      "image",
      `${field}: is empty; expected base64-encoded PNG or JPEG bytes or a data URI such as data:image/png;base64,...`,
    );
  }
  if (value.slice(0, 5).toLowerCase() !== "data:") {
    return { declared: null, declaredType: null, payload: value };
  }
  // Search the comma only near the start: a missing comma must not cost a
  // scan of a 36 MB string, and no accepted header is longer than 23 chars.
  const comma = value.slice(0, MAX_HEADER).indexOf(",");
  if (comma < 0) {
    throw new ToolError(
      "image",
      `${field}: data URI ${quote(value)} has no "," after its header; ${ACCEPTED_TEXT}`,
    );
  }
  const header = value.slice(5, comma);
  const prefix = value.slice(0, comma + 1);
  const parts = header.split(";");
  const mediaType = parts[0].toLowerCase();
  const isBase64 = parts.length >= 2 && parts[parts.length - 1].toLowerCase() === "base64";
  if (!isBase64) {
    throw new ToolError(
      "image",
      `${field}: data URI ${
        quote(prefix)
      } is not base64-encoded (missing ";base64"); ${ACCEPTED_TEXT}`,
    );
  }
  const format = ACCEPTED[mediaType];
  if (format === undefined) {
    throw new ToolError(
      "image",
      `${field}: data URI media type ${
        quote(parts[0])
      } is not supported (PNG and JPEG only); ${ACCEPTED_TEXT}`,
    );
  }
  if (parts.length !== 2) {
    throw new ToolError(
      "image",
      `${field}: data URI ${
        quote(prefix)
      } has parameters between the media type and ";base64"; ${ACCEPTED_TEXT}`,
    );
  }
  return { declared: format, declaredType: parts[0], payload: value.slice(comma + 1) };
}
