/**
 * Generation jobs: every image-tool call is a job with an unguessable id
 * and an owner, queued FIFO in a store (in memory over stdio, PostgreSQL
 * over HTTP), run by the engine one at a time, waited for at most
 * `[generation] max_wait_seconds`, and kept `[jobs] result_ttl_seconds`
 * for `get_generation`.
 *
 * @module
 */

export { JobService } from "./service.ts";
export { callerOf, ownerOf } from "./caller.ts";
export { handOffDescription } from "./result.ts";
export {
  deliverResult,
  type DeliveryOptions,
  INLINE_IMAGE_BUDGET,
  RESOURCE_LINK_REVISION,
  takesResourceLinks,
} from "./delivery.ts";
export {
  createJobImageTemplate,
  JOB_IMAGE_URI_TEMPLATE,
  jobImageUri,
  parseJobImageUri,
} from "./image_resource.ts";
export type { JobHealth, JobServiceOptions } from "./service.ts";
export { MemoryJobStore } from "./memory_store.ts";
export { PostgresJobStore, replicaApplicationName } from "./postgres_store.ts";
export type { PostgresJobStoreOptions } from "./postgres_store.ts";
export { JOB_CHANNEL, JobBus } from "./bus.ts";
export type { BusMessage, JobBusOptions } from "./bus.ts";
export { CANCEL_POLL_MS, JobRunner } from "./runner.ts";
export type { JobExecutor, JobRunnerOptions, RunningJob } from "./runner.ts";
export { JOB_ID_PATTERN, newJobId } from "./job_id.ts";
export { StepTimer } from "./estimate.ts";
export type { WorkLeft } from "./estimate.ts";
export * from "./types.ts";
export { JobTasks } from "./tasks.ts";
export { QueueFullError, queueShares } from "./queue_full.ts";
