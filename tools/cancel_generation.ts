/**
 * `cancel_generation`: stop a generation job. A queued job leaves the queue;
 * a running one stops at the next denoising step; the finished images of a
 * batch are kept and returned.
 *
 * @module
 */

import { z } from "zod";
import type { JobService } from "../mod/jobs/mod.ts";
import type { ToolDefinition } from "../mod/mcp/mod.ts";
import { JOB_ID_SCHEMA, jobId } from "./get_generation.ts";
import { jobToolAnnotations } from "./job_tool.ts";

/** What `cancel_generation` needs. */
export interface CancelGenerationDeps {
  /** The job service. */
  jobs: JobService;
}

/** The JSON Schema shown in `tools/list`. */
export const CANCEL_GENERATION_SCHEMA = {
  type: "object",
  title: "cancel_generationArguments",
  properties: { job_id: JOB_ID_SCHEMA },
  required: ["job_id"],
} as const;

/** zod validation of `cancel_generation` arguments. */
export const cancelGenerationArgs = z.strictObject({ job_id: jobId });

/** Creates the `cancel_generation` tool. */
export function createCancelGenerationTool(
  deps: CancelGenerationDeps,
): ToolDefinition<typeof cancelGenerationArgs> {
  return {
    name: "cancel_generation",
    description: "Cancel a generation job by its job_id. A queued job is removed from the " +
      "queue; a running one stops at its next step. Images of a batch that were already " +
      "finished are kept and returned with the answer (and by get_generation). Cancelling " +
      "a job that has ended changes nothing. Only the API key that made a job can cancel it.",
    inputSchema: CANCEL_GENERATION_SCHEMA,
    annotations: jobToolAnnotations("Cancel generation", {
      destructiveHint: true,
      idempotentHint: true,
    }),
    validate: cancelGenerationArgs,
    handle(args, context) {
      return deps.jobs.cancel(args.job_id, context);
    },
  };
}
