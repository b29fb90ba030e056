/**
 * A started job service for tests of the tools: on an in-memory store, or
 * on any store a test opens.
 *
 * @module
 */

import { checkImageRequest, type ImageService, runImageRequest } from "../generation/mod.ts";
import { MemoryJobStore } from "./memory_store.ts";
import { JobService } from "./service.ts";
import type { JobStore } from "./types.ts";

/** Options of {@link startMemoryJobs}. */
export interface MemoryJobsOptions {
  /** `[generation] queue_limit` (default 4). */
  queueLimit?: number;
  /** Bounded wait in ms (default Infinity: calls wait until done). */
  maxWaitMs?: number;
  /** Result TTL in ms (default one hour). */
  resultTtlMs?: number;
  /** Result byte cap (default 64 MiB). */
  maxResultBytes?: number;
  /** Bytes of images a result carries inline (default: the service's). */
  inlineImageBytes?: number;
}

/** Starts a job service whose runner makes images with `images`; dispose it when done. */
export function startMemoryJobs(
  images: ImageService,
  options: MemoryJobsOptions = {},
): Promise<JobService> {
  const store = new MemoryJobStore({
    queueLimit: options.queueLimit ?? 4,
    resultTtlMs: options.resultTtlMs ?? 3_600_000,
    maxResultBytes: options.maxResultBytes ?? 64 * 1024 * 1024,
  });
  return startJobs(images, store, options);
}

/** Starts a job service on `store` (its limits are the store's); dispose it when done. */
export async function startJobs(
  images: ImageService,
  store: JobStore,
  options: MemoryJobsOptions = {},
): Promise<JobService> {
  const jobs = new JobService({
    store,
    execute: (job, hooks) => runImageRequest(images, job.request, hooks),
    checkRequest: (request) => checkImageRequest(request, { maxCount: 10 }),
    maxWaitMs: options.maxWaitMs ?? Infinity,
    resultTtlSeconds: (options.resultTtlMs ?? 3_600_000) / 1000,
    queueLimit: options.queueLimit ?? 4,
    stepsPerImage: 2,
    worker: "test",
    inlineImageBytes: options.inlineImageBytes,
  });
  await jobs.start();
  return jobs;
}
