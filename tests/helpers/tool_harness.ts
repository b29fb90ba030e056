/**
 * Calling tool handlers directly in tests: a scripted engine, a context that
 * records progress, and a scope that disposes the job services a test started.
 *
 * @module
 */

import type { JobService } from "../../mod/jobs/mod.ts";
import { type ToolContext, ToolError } from "../../mod/mcp/mod.ts";
import type { GenerationRequest, Generator } from "../../mod/pipeline/types.ts";

/**
 * An engine that records every request, reports `steps` progress steps and
 * returns a flat image of the request's size (value 20 × the call number);
 * call `n` fails with an inference error when `fail(n)` gives a reason.
 */
export function scriptedGenerator(
  fail: (call: number) => string | null = () => null,
  steps = 2,
): { generator: Generator; requests: GenerationRequest[] } {
  const requests: GenerationRequest[] = [];
  const generator: Generator = {
    generate(request, options) {
      requests.push(request);
      const reason = fail(requests.length);
      if (reason) return Promise.reject(new ToolError("inference", reason));
      for (let s = 1; s <= steps; s++) options?.onProgress?.(s, steps);
      const data = new Uint8Array(request.width * request.height * 3).fill(requests.length * 20);
      return Promise.resolve({
        image: { width: request.width, height: request.height, data },
        notes: [],
      });
    },
    close: () => Promise.resolve(),
  };
  return { generator, requests };
}

/** A tool context (never aborted) that appends every progress report to `progress`. */
export function toolContext(progress: Array<[number, number | undefined]> = []): ToolContext {
  return {
    signal: new AbortController().signal,
    progress: (p, total) => {
      progress.push([p, total]);
      return Promise.resolve();
    },
  };
}

/** Job services started by tests: `track` each one, wrap each test with `scoped`. */
export function jobScope(): {
  track(jobs: JobService): JobService;
  scoped(fn: () => Promise<void>): () => Promise<void>;
} {
  const started: JobService[] = [];
  return {
    track(jobs) {
      started.push(jobs);
      return jobs;
    },
    scoped(fn) {
      return async () => {
        try {
          await fn();
        } finally {
          for (const jobs of started.splice(0)) await jobs.dispose();
        }
      };
    },
  };
}
