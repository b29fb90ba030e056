/**
 * The generation queue.
 *
 * @module
 */

export { ConcurrencyLimit } from "./concurrency_limit.ts";
export { GenerationQueue } from "./generation_queue.ts";
export type { QueueStats } from "./generation_queue.ts";
