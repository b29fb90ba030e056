/**
 * What a client receives of a finished job: the job's result as the tools
 * build it (mod/jobs/result.ts), fitted to the limits clients put on a tool
 * result. Its images share {@link INLINE_IMAGE_BUDGET}, smallest first
 * (each gets an equal part of what the smaller ones left): an image that
 * fits its part goes out as it is, the PNG the engine made; one that does
 * not (an upscale's 1024×1024 PNG, a batch of several 512×512 ones) goes as
 * the largest preview within its part (mod/image/preview.ts), followed by a
 * link to its full-size PNG, a resource of the job
 * (mod/jobs/image_resource.ts): a `resource_link` for clients of MCP
 * 2025-06-18 and later, where that content block appeared, a short text
 * naming the URI for older ones. A result whose PNGs fit together (one
 * 512×512 image, a small batch) is exactly what the tools always returned.
 *
 * Why 1 MiB of serialized result: Claude Desktop refuses a tool result over
 * 1,048,576 characters ("result exceeds maximum length of 1048576",
 * PrefectHQ/fastmcp#1036), Codex turns an image result over about 1 MiB into
 * truncated text (openai/codex#44126). The budget, 750,000 bytes of images,
 * is 1,000,000 base64 characters: the rest of the MiB is left to the texts
 * and the JSON around them. No image of this server nears the Anthropic
 * API's 8000 px per side (the largest is 1024×1024).
 *
 * Nothing is copied into `structuredContent`: Claude Code put a result's
 * `structuredContent` into the model's context as text beside the image
 * (anthropics/claude-code#70280), and dropped the image blocks of a result
 * that had one (anthropics/claude-code#54737).
 *
 * @module
 */

import { pngDimensions, previewWithin } from "../image/mod.ts";
import type { ImageContent, ResourceLinkContent, TextContent, ToolResult } from "../mcp/tool.ts";
import { jobImageUri } from "./image_resource.ts";
import type { JobSummary, StoredPreview } from "./types.ts";

/**
 * Most bytes of images one result carries inline (decoded): 750,000 bytes
 * are 1,000,000 base64 characters, so the whole result stays under 1 MiB.
 */
export const INLINE_IMAGE_BUDGET = 750_000;

/** The first MCP revision with `resource_link` content (2025-06-18 changelog, PR #603). */
export const RESOURCE_LINK_REVISION = "2025-06-18";

/** Whether a client of MCP revision `protocolVersion` takes `resource_link` content. */
export function takesResourceLinks(protocolVersion: string | undefined): boolean {
  // Revisions are ISO dates: they order as strings.
  return protocolVersion !== undefined && protocolVersion >= RESOURCE_LINK_REVISION;
}

/** Options of {@link deliverResult}. */
export interface DeliveryOptions {
  /** The client's MCP revision (`ToolContext.protocolVersion`); absent: no `resource_link`. */
  protocolVersion?: string;
  /** Bytes of inline images per result (default {@link INLINE_IMAGE_BUDGET}). */
  inlineBytes?: number;
}

/** Decoded length of canonical base64 `data`. */
function decodedLength(data: string): number {
  const padding = data.endsWith("==") ? 2 : data.endsWith("=") ? 1 : 0;
  return (data.length / 4) * 3 - padding;
}

/** `412 KiB`, `1.5 MiB`: a size for a sentence. */
export function sizeText(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${Math.round(bytes / 1024)} KiB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}

/**
 * Which images of a result go inline as they are and which as previews:
 * the images share `budget`, smallest first, each an equal part of what the
 * smaller ones left. Returns the previews (none when all fit); `images` are
 * the result's image items, in order.
 */
export async function planPreviews(
  images: readonly ImageContent[],
  budget: number,
): Promise<StoredPreview[]> {
  const sizes = images.map((image) => decodedLength(image.data));
  if (sizes.reduce((a, b) => a + b, 0) <= budget) return [];
  const previews: StoredPreview[] = [];
  let left = budget;
  const order = sizes.map((size, i) => ({ size, i })).sort((a, b) => a.size - b.size || a.i - b.i);
  for (const [k, { size, i }] of order.entries()) {
    const share = Math.floor(left / (order.length - k));
    if (size <= share) {
      left -= size;
      continue;
    }
    const png = Uint8Array.fromBase64(images[i].data);
    // A share is at least 7,500 bytes (the default budget over `max_count` 100), far above
    // the ~1 KB of the smallest preview `previewWithin` makes before it gives up.
    const preview = await previewWithin(png, share);
    left -= preview.bytes.length;
    const full = pngDimensions(png);
    previews.push({
      image: i + 1,
      budget,
      mimeType: preview.mimeType,
      width: preview.width,
      height: preview.height,
      data: preview.bytes.toBase64(),
      full: { width: full.width, height: full.height, bytes: png.length },
    });
  }
  return previews.sort((a, b) => a.image - b.image);
}

/** Bytes a stored preview counts against the result caps (as `itemBytes` counts an image). */
export function previewBytes(preview: StoredPreview): number {
  return preview.data.length;
}

/**
 * `result` (the content of finished job `job`) as a client receives it:
 * see the module documentation. Image items are the job's PNGs, in order.
 * The job's stored previews are used when they were planned for this
 * budget; otherwise (a job that ended before previews were stored, or a
 * server started with another budget) they are made now.
 */
export async function deliverResult(
  result: ToolResult,
  job: JobSummary & { previews?: readonly StoredPreview[] },
  options: DeliveryOptions = {},
): Promise<ToolResult> {
  const budget = options.inlineBytes ?? INLINE_IMAGE_BUDGET;
  const images = result.content.filter((c): c is ImageContent => c.type === "image");
  // (Images with a stored preview may come without their data: see `JobStore.get`.)
  const stored = job.previews?.length && job.previews.every((p) => p.budget === budget)
    ? job.previews
    : null;
  if (!stored && images.reduce((n, image) => n + decodedLength(image.data), 0) <= budget) {
    return result;
  }
  const previews = stored ?? await planPreviews(images, budget);
  const byImage = new Map(previews.map((p) => [p.image, p]));
  const links = takesResourceLinks(options.protocolVersion);
  const until = job.expiresAt ? `, until ${job.expiresAt.toISOString()}` : "";
  const content: ToolResult["content"] = [];
  let index = 0;
  let caption: string | null = null;
  for (const item of result.content) {
    if (item.type !== "image") {
      content.push(item);
      caption = item.type === "text" ? item.text : null;
      continue;
    }
    const preview = byImage.get(++index);
    if (!preview) {
      content.push(item);
      caption = null;
      continue;
    }
    const full = preview.full;
    const uri = jobImageUri(job.id, index);
    const fullText = `${full.width}x${full.height}, ${sizeText(full.bytes)}`;
    const previewText = `${preview.width}x${preview.height} ` +
      `${preview.mimeType === "image/png" ? "PNG" : "JPEG"} preview ` +
      `(${sizeText(decodedLength(preview.data))})`;
    content.push({ type: "image", data: preview.data, mimeType: preview.mimeType });
    if (links) {
      // `[i/N] …` names the batch position; the URI counts finished images.
      const position = caption?.match(/^\[(\d+)\/(\d+)\] /);
      const link: ResourceLinkContent = {
        type: "resource_link",
        uri,
        name: `${job.id}_${index}.png`,
        title: position ? `Image ${position[1]} of ${position[2]}, full size` : "Full-size image",
        description: `The image above is a ${previewText}; this is its full-size PNG ` +
          `(${fullText}; seed and settings in its metadata), readable with resources/read` +
          `${until}. The preview already shows the picture.`,
        mimeType: "image/png",
        size: full.bytes,
        // The full file is for the person (to save or open); the model has the preview.
        annotations: { audience: ["user"] },
      };
      content.push(link);
    } else {
      const text: TextContent = {
        type: "text",
        text: `The image above is a ${previewText}. Full-size PNG (${fullText}; seed and ` +
          `settings in its metadata): resources/read ${uri}${until}.`,
      };
      content.push(text);
    }
    caption = null;
  }
  return { ...result, content };
}
