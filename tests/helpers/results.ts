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
