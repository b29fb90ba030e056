/**
 * `get_generation`: the result of a generation job by its id — the same
 * content the original call would have returned, or, while it still runs,
 * its status after waiting up to the bound.
 *
 * @module
 */

import { z } from "zod";
import { JOB_ID_PATTERN, type JobService } from "../mod/jobs/mod.ts";
import type { ToolDefinition, ZodField } from "../mod/mcp/mod.ts";
import { jobToolAnnotations } from "./job_tool.ts";

/** What `get_generation` needs. */
export interface GetGenerationDeps {
  /** The job service. */
  jobs: JobService;
  /** `[generation] max_wait_seconds` in ms (Infinity: until done); also the default wait. */
  maxWaitMs: number;
}

/** The `job_id` argument shared by the job tools. */
export const jobId: ZodField<string> = z.string({
  error: (i) =>
    i.input === undefined
      ? "required: the job_id a generation call returned"
      : `must be a string, got ${i.input === null ? "null" : typeof i.input}`,
}).regex(JOB_ID_PATTERN, {
  error: (i) =>
    `must be a generation job id ("gen_" and 22 letters, digits, _ or -), got ${
      JSON.stringify(i.input)
    }`,
});

/** The `job_id` property of the job tools' JSON Schemas. */
export const JOB_ID_SCHEMA = {
  type: "string",
  title: "Job Id",
  pattern: JOB_ID_PATTERN.source,
  description: 'The job_id ("gen_…") that an image tool or list_generations returned.',
} as const;

/** The JSON Schema shown in `tools/list`. */
export function getGenerationSchema(maxWaitMs: number) {
  const bound = Number.isFinite(maxWaitMs) ? `, at most ${maxWaitMs / 1000}` : "";
  return {
    type: "object",
    title: "get_generationArguments",
    properties: {
      job_id: JOB_ID_SCHEMA,
      wait_seconds: {
        anyOf: [{ type: "number", minimum: 0 }, { type: "null" }],
        default: null,
        title: "Wait Seconds",
        description: `How long to wait for the job to finish before answering with its ` +
          `status (seconds${bound}; null means the server's limit; 0 answers at once).`,
      },
    },
    required: ["job_id"],
  } as const;
}

/** zod validation of `get_generation` arguments. */
export const getGenerationArgs = z.strictObject({
  job_id: jobId,
  wait_seconds: z.number({
    error: (i) => `must be a number of seconds or null, got ${JSON.stringify(i.input)}`,
  }).min(0, { error: (i) => `must be 0 or more, got ${JSON.stringify(i.input)}` })
    .nullable().optional().transform((v) => v ?? null),
});

/** Creates the `get_generation` tool. */
export function createGetGenerationTool(
  deps: GetGenerationDeps,
): ToolDefinition<typeof getGenerationArgs> {
  return {
    name: "get_generation",
    description: "Get the images of a generation job by its job_id. An image tool answers " +
      "with a job_id instead of images when the images take longer than the server waits; " +
      "call this with that id. When the job is done it returns exactly what the image tool " +
      "would have returned; while it is still queued or running it waits a while, then " +
      "returns the progress, the queue position and an estimate of the time left, and you " +
      "can call it again. Results are kept for a limited time after the job ends.",
    inputSchema: getGenerationSchema(deps.maxWaitMs),
    annotations: jobToolAnnotations("Get generation", { readOnlyHint: true, idempotentHint: true }),
    validate: getGenerationArgs,
    handle(args, context) {
      const waitMs = args.wait_seconds === null ? Infinity : args.wait_seconds * 1000;
      return deps.jobs.get(args.job_id, waitMs, context);
    },
  };
}
