/**
 * The "busy" refusals of the job queue, shared by both stores so that the
 * text is the same whichever one is in use (and the same as before jobs).
 *
 * @module
 */

import { ToolError } from "../mcp/tool.ts";
import type { QueueCounts } from "./types.ts";

/** Whether one more job fits: at most `limit` may wait behind the running one. */
export function hasRoom(counts: QueueCounts, limit: number): boolean {
  return counts.running + counts.queued <= limit;
}

/** The error a full queue answers with. */
export function queueFullError(counts: QueueCounts, limit: number): ToolError {
  return new ToolError(
    "busy",
    `the generation queue is full (${counts.running} running, ${counts.queued} waiting, ` +
      `generation.queue_limit = ${limit}); try again in a minute`,
  );
}
