/**
 * The "busy" refusals of the job queue, shared by both stores so that the
 * text is the same whichever one is in use (and the same as before jobs).
 *
 * @module
 */

import { ToolError } from "../mcp/tool.ts";
import type { QueueCounts } from "./types.ts";

/**
 * Whether one more job fits: at most `limit` may wait behind the running one.
 * With several engines on one queue (replicas) `limit` counts the jobs
 * waiting in the whole queue, however many run; with one engine that is the
 * same rule as before.
 */
export function hasRoom(counts: QueueCounts, limit: number): boolean {
  return Math.min(counts.running, 1) + counts.queued <= limit;
}

/** The error a full queue answers with. */
export function queueFullError(counts: QueueCounts, limit: number): ToolError {
  return new ToolError(
    "busy",
    `the generation queue is full (${counts.running} running, ${counts.queued} waiting, ` +
      `generation.queue_limit = ${limit}); try again in a minute`,
  );
}
