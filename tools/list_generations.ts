/**
 * `list_generations`: the recent generation jobs the caller can see (its
 * own, and its project's), newest first.
 *
 * @module
 */

import { z } from "zod";
import type { JobService } from "../mod/jobs/mod.ts";
import type { ToolDefinition } from "../mod/mcp/mod.ts";
import { jobToolAnnotations } from "./job_tool.ts";

/** What `list_generations` needs. */
export interface ListGenerationsDeps {
  /** The job service. */
  jobs: JobService;
}

/** Most jobs one call lists. */
export const MAX_LIST_LIMIT = 100;

/** The JSON Schema shown in `tools/list`. */
export const LIST_GENERATIONS_SCHEMA = {
  type: "object",
  title: "list_generationsArguments",
  properties: {
    limit: {
      anyOf: [{ type: "integer", minimum: 1, maximum: MAX_LIST_LIMIT }, { type: "null" }],
      default: null,
      title: "Limit",
      description: `How many jobs to list, newest first (1 to ${MAX_LIST_LIMIT}; null means 20).`,
    },
  },
} as const;

/** zod validation of `list_generations` arguments. */
export const listGenerationsArgs = z.strictObject({
  limit: z.int({
    error: (i) =>
      `must be a whole number from 1 to ${MAX_LIST_LIMIT} or null, got ${JSON.stringify(i.input)}`,
  }).min(1, { error: (i) => `must be at least 1, got ${JSON.stringify(i.input)}` })
    .max(MAX_LIST_LIMIT, {
      error: (i) => `must be at most ${MAX_LIST_LIMIT}, got ${JSON.stringify(i.input)}`,
    }).nullable().optional().transform((v) => v ?? 20),
});

/** Creates the `list_generations` tool. */
export function createListGenerationsTool(
  deps: ListGenerationsDeps,
): ToolDefinition<typeof listGenerationsArgs> {
  return {
    name: "list_generations",
    description: "List your recent generation jobs, newest first: job_id, state (queued, " +
      "running, succeeded, failed, cancelled), tool, number of images, when it was created " +
      "and the start of its prompt. With an API key bound to a project, the jobs of the " +
      "project's other keys are listed too, with their key. Use get_generation with a job_id " +
      "to fetch its images; a call that was interrupted before it answered is found here. " +
      "Finished jobs disappear once their results expire.",
    inputSchema: LIST_GENERATIONS_SCHEMA,
    annotations: jobToolAnnotations("List generations", {
      readOnlyHint: true,
      idempotentHint: true,
    }),
    validate: listGenerationsArgs,
    handle(args, context) {
      return deps.jobs.list(args.limit, context);
    },
  };
}
