/**
 * Reading MCP tool results in tests.
 *
 * @module
 */

/** One content item as the client receives it. */
export type Content = { type: string; text?: string; data?: string; mimeType?: string };

/** The content items of a tool result. */
export function contents(result: unknown): Content[] {
  return ((result as { content?: Content[] }).content ?? []);
}

/** All text items joined by newlines. */
export function texts(result: unknown): string {
  return contents(result).filter((c) => c.type === "text").map((c) => c.text).join("\n");
}

/** The decoded PNG bytes of every image item. */
export function pngs(result: unknown): Uint8Array[] {
  return contents(result).filter((c) => c.type === "image").map((c) =>
    Uint8Array.fromBase64(c.data!)
  );
}

/** Width and height from a PNG's IHDR. */
export function pngSize(png: Uint8Array): [number, number] {
  const view = new DataView(png.buffer, png.byteOffset);
  return [view.getUint32(16), view.getUint32(20)];
}

/**
 * Most characters of one text block of an image or job result: a status,
 * an `[i/N]` caption or a link's text is a few lines, a list of jobs one
 * line each (the list stops at 7,000 characters).
 */
export const MAX_TEXT_BLOCK = 7_000;

/**
 * Most characters of all text of one result (of up to 10 images, the
 * default `max_count`): clients cut a result's text at about 10 KB
 * (github/copilot-cli#1732, openai/codex#6544).
 */
export const MAX_RESULT_TEXT = 8_192;

/** Most bytes one inline image may decode to: Codex turns a larger one into text (openai/codex#44126). */
export const MAX_INLINE_IMAGE = 1_048_576;

/** Most characters of a whole serialized result: Claude Desktop refuses more (PrefectHQ/fastmcp#1036). */
export const MAX_RESULT_JSON = 1_048_576;

/**
 * Asserts what every client can take of a tool result: each inline image
 * decodes (canonical base64) to at most {@link MAX_INLINE_IMAGE} bytes, the
 * whole result serializes to under {@link MAX_RESULT_JSON} characters, each
 * text block has at most {@link MAX_TEXT_BLOCK} characters and all of them
 * at most {@link MAX_RESULT_TEXT}, and `structuredContent` holds no image
 * data: absent beside images, and no long base64-like string anywhere in it.
 */
export function assertClientSafe(result: unknown, label = "result"): void {
  const r = result as { content?: Content[]; structuredContent?: unknown };
  const content = contents(result);
  let text = 0;
  for (const [i, c] of content.entries()) {
    if (c.type === "image") {
      const bytes = Uint8Array.fromBase64(c.data!);
      if (bytes.length > MAX_INLINE_IMAGE) {
        throw new Error(
          `${label}: image ${i} decodes to ${bytes.length} bytes > ${MAX_INLINE_IMAGE}`,
        );
      }
    } else if (c.type === "text") {
      if (c.text!.length > MAX_TEXT_BLOCK) {
        throw new Error(`${label}: text ${i} has ${c.text!.length} characters > ${MAX_TEXT_BLOCK}`);
      }
      text += c.text!.length;
    }
  }
  if (text > MAX_RESULT_TEXT) {
    throw new Error(`${label}: ${text} characters of text > ${MAX_RESULT_TEXT}`);
  }
  const json = JSON.stringify(result).length;
  if (json >= MAX_RESULT_JSON) throw new Error(`${label}: ${json} characters serialized`);
  if (r.structuredContent === undefined) return;
  if (content.some((c) => c.type === "image")) {
    throw new Error(`${label}: structuredContent beside images`);
  }
  const long = (value: unknown): boolean =>
    typeof value === "string"
      ? value.length > 200 && /^[A-Za-z0-9+/_-]+={0,2}$/.test(value)
      : value !== null && typeof value === "object" && Object.values(value).some(long);
  if (long(r.structuredContent)) throw new Error(`${label}: base64-like data in structuredContent`);
}

/** One image of a result: its `[i/N]` caption, the image, and the URI of its full PNG, if linked. */
export interface ImageEntry {
  /** The `[i/N] …` text right before it, or null. */
  caption: string | null;
  /** The inline image (the PNG itself, or a preview when `link` is set). */
  image: Content;
  /** The full PNG's URI: a `resource_link` after it, or a text after it naming the URI. */
  link: string | null;
  /** How the link came: `resource_link` or `text`. */
  linkKind: "resource_link" | "text" | null;
}

/** The images of a result with their captions and links, in order. */
export function imageEntries(result: unknown): ImageEntry[] {
  const items = contents(result) as Array<Content & { uri?: string }>;
  const out: ImageEntry[] = [];
  items.forEach((item, i) => {
    if (item.type !== "image") return;
    const before = items[i - 1];
    const after = items[i + 1];
    const caption = before?.type === "text" && /^\[\d+\/\d+\] /.test(before.text!)
      ? before.text!
      : null;
    const named = after?.type === "text" ? after.text!.match(/resources\/read (\S+?)[,.]/) : null;
    const link = after?.type === "resource_link" ? after.uri! : named ? named[1] : null;
    const linkKind = after?.type === "resource_link" ? "resource_link" : named ? "text" : null;
    out.push({ caption, image: item, link, linkKind });
  });
  return out;
}
