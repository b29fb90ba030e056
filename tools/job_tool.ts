/**
 * What the job tools share: their annotations (they work on this server's
 * own jobs), and for the image tools the path of a one-image call once its
 * arguments are valid (room in the queue, the inputs decoded under the
 * decode limits, then the job). Each tool keeps its own schema, description
 * and checks; only the common steps live here.
 *
 * @module
 */

import type { ImageRequest, ImageService } from "../mod/generation/mod.ts";
import { decodeImageInput, type ImageField, toRgbImage } from "../mod/image/mod.ts";
import type { JobService } from "../mod/jobs/mod.ts";
import type { ToolAnnotations, ToolContext, ToolResult } from "../mod/mcp/mod.ts";
import { type SizeId, SIZES } from "../mod/pipeline/types.ts";
import type { RgbImage } from "../mod/pipeline/types.ts";

/**
 * The annotations of a tool that works on this server's own jobs (not an
 * open world): by default one that makes a new job each call, so neither
 * read-only, destructive nor idempotent; `hints` says where a tool differs.
 */
export function jobToolAnnotations(
  title: string,
  hints: Partial<Omit<ToolAnnotations, "title" | "openWorldHint">> = {},
): ToolAnnotations {
  return {
    title,
    readOnlyHint: false,
    destructiveHint: false,
    idempotentHint: false,
    openWorldHint: false,
    ...hints,
  };
}

/** What the image tools need from the server. */
export interface ImageToolDeps {
  images: ImageService;
  /** Runs the call as a job and waits for it (bounded). */
  jobs: JobService;
}

/** An {@link ImageRequest} of one image, less what {@link submitOneImage} fills in. */
export type OneImageRequest = ImageRequest extends infer R
  ? R extends unknown ? Omit<R, "name" | "seeds" | "receivedAt"> : never
  : never;

/**
 * Submits a one-image call: checks the caller has room for a job, decodes
 * its inputs with `prepare` (under the server's decode limits), then runs
 * `request(inputs)` as a job with no name and the next seed.
 */
export async function submitOneImage<T>(
  deps: ImageToolDeps,
  context: ToolContext,
  receivedAt: number,
  prepare: () => Promise<T>,
  request: (inputs: T) => OneImageRequest,
): Promise<ToolResult> {
  await deps.jobs.assertRoom(context);
  const inputs = await deps.images.prepareInputs(context.scope?.keyPrefix, prepare);
  return await deps.jobs.submit({
    ...request(inputs),
    name: null,
    seeds: [deps.images.seedFor(1)],
    receivedAt,
  } as ImageRequest, context);
}

/** The image string of argument `field`, decoded and stretched to the size `sizeId`. */
export async function rgbInputAt(
  field: ImageField,
  value: string,
  sizeId: SizeId,
): Promise<RgbImage> {
  const { width, height } = SIZES[sizeId];
  return await toRgbImage(await decodeImageInput(field, value), width, height);
}
