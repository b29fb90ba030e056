/**
 * Failure classes of the engine: cancellation and out-of-memory, told apart
 * from other inference failures so the tools can answer with the contract's
 * error category.
 *
 * @module
 */

import type { ToolError } from "../mcp/tool.ts";

/** Thrown at a step boundary when the request was cancelled. */
export class CancelledError extends Error {
  /** Creates the error; `message` says where the run stopped. */
  constructor(message = "generation cancelled") {
    super(message);
    this.name = "CancelledError";
  }
}

/**
 * Texts that mean memory ran out: ONNX Runtime's allocator ("Failed to
 * allocate memory", `BFCArena … Failed to allocate`), V8 ("Array buffer
 * allocation failed", "Invalid array length" for huge typed arrays is not
 * included: that is a bug, not memory), C++ `std::bad_alloc`, CUDA OOM.
 */
const OOM_PATTERN =
  /failed to allocate|array buffer allocation failed|bad_alloc|out of memory|cudaErrorMemoryAllocation/i;

/** True when `error` (or one of its causes) reports that memory ran out. */
export function isOutOfMemory(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e !== undefined && depth < 8; depth++) {
    if (e instanceof RangeError && /allocation failed/i.test(e.message)) return true;
    const message = e instanceof Error ? e.message : typeof e === "string" ? e : "";
    if (OOM_PATTERN.test(message)) return true;
    e = e instanceof Error ? e.cause : undefined;
  }
  return false;
}

/** The message of any thrown value. */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The contract's error classes (as `ToolError.category`). */
export type ErrorCategory = ToolError["category"];

/** A failure reduced to what crosses the Worker boundary. */
export type ClassifiedError =
  | { category: ErrorCategory; message: string }
  | { category: "cancelled"; message: string };

/**
 * Classifies a thrown value: {@link CancelledError} → "cancelled"; anything
 * carrying a `category` (a `ToolError`) keeps it; out-of-memory texts →
 * "out_of_memory"; everything else is an "inference" failure.
 */
export function classifyError(error: unknown): ClassifiedError {
  if (error instanceof CancelledError) return { category: "cancelled", message: error.message };
  const category = (error as { category?: unknown } | null)?.category;
  if (typeof category === "string" && error instanceof Error) {
    return { category: category as ErrorCategory, message: error.message };
  }
  if (isOutOfMemory(error)) {
    return {
      category: "out_of_memory",
      message:
        `out of memory during generation: ${errorMessage(error)}; the models were unloaded ` +
        `and are reloaded on the next request (try fewer concurrent jobs, or a smaller model set)`,
    };
  }
  return { category: "inference", message: `inference failed: ${errorMessage(error)}` };
}
