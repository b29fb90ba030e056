/**
 * The generation queue.
 *
 * @module
 */

export { GenerationQueue } from "./generation_queue.ts";
export type { QueueStats } from "./generation_queue.ts";
