/**
 * The full-size images of generation jobs as MCP resources, one URI per
 * finished image: `generation://jobs/{job_id}/images/{index}`, `index`
 * counting the job's finished images from 1 in result order. A result too
 * large for clients carries a smaller preview inline and a `resource_link`
 * to this (mod/jobs/delivery.ts); `resources/read` returns the PNG the
 * engine made, metadata and all.
 *
 * A resource is readable by whoever may fetch its job with
 * `get_generation` (its API key, or any key of its project; over stdio, this
 * process) and for as long as the job is kept (`[jobs] result_ttl_seconds`
 * after it ends, while the result space allows). Anything else (another
 * key's job, an expired or trimmed one, a mistyped id or index) reads as
 * not found, the same for all, so a job's existence is never disclosed.
 * The job id sits in the URI's path, not its authority: a job id is
 * case-sensitive, and a client may lower-case a URI's host (RFC 3986 §3.2.2).
 *
 * @module
 */

import type { ResourceTemplateDefinition, TemplateResourceContents } from "../mcp/resource.ts";
import type { ImageContent, Scope } from "../mcp/tool.ts";
import { JOB_ID_PATTERN } from "./job_id.ts";
import { callerOf } from "./caller.ts";
import type { JobItem, JobStore } from "./types.ts";

/** The URI template (RFC 6570 level 1) of a job's full-size images. */
export const JOB_IMAGE_URI_TEMPLATE = "generation://jobs/{job_id}/images/{index}";

/** The URI of image `index` (1-based, in result order) of job `jobId`. */
export function jobImageUri(jobId: string, index: number): string {
  return `generation://jobs/${jobId}/images/${index}`;
}

/** The job id and image index a URI of {@link JOB_IMAGE_URI_TEMPLATE} names, or null. */
export function parseJobImageUri(uri: string): { jobId: string; index: number } | null {
  const match = /^generation:\/\/jobs\/([^/]+)\/images\/([1-9][0-9]{0,5})$/.exec(uri);
  if (!match || !JOB_ID_PATTERN.test(match[1])) return null;
  return { jobId: match[1], index: Number(match[2]) };
}

/** The `index`-th image item (1-based) of a job's items, or null. */
export function jobImage(items: readonly JobItem[], index: number): ImageContent | null {
  let seen = 0;
  for (const item of items) {
    if (item.type === "image" && ++seen === index) return item;
  }
  return null;
}

/**
 * The resource template of job images, reading from `store` (the job
 * service's: `JobService.store`). `resultTtlSeconds` is `[jobs]
 * result_ttl_seconds`, named in the description.
 */
export function createJobImageTemplate(
  store: JobStore,
  resultTtlSeconds: number,
): ResourceTemplateDefinition {
  return {
    uriTemplate: JOB_IMAGE_URI_TEMPLATE,
    name: "generation_image",
    title: "Generated image, full size",
    description: "The full-size PNG (with its seed and settings in the PNG text metadata) of " +
      "image {index} of generation job {job_id}, as a tool result's resource_link names it " +
      "when the result carries a smaller preview. Readable by the API key that made the job " +
      `(or a key of its project) for ${resultTtlSeconds} s after the job ends, while the ` +
      "server's result space allows; after that, or for another key's job, it is not found.",
    mimeType: "image/png",
    async read(uri: string, scope: Scope | undefined): Promise<TemplateResourceContents | null> {
      const named = parseJobImageUri(uri);
      if (!named) return null;
      // The store applies ownership (canSee) and expiry: another key's or an expired job is null.
      const job = await store.get(named.jobId, callerOf(scope));
      const image = job ? jobImage(job.items, named.index) : null;
      if (!image) return null;
      return { uri, mimeType: image.mimeType, blob: image.data };
    },
  };
}
