/**
 * Concurrency limits. (The generation queue itself is the job store's, in
 * mod/jobs.)
 *
 * @module
 */

export { ConcurrencyLimit } from "./concurrency_limit.ts";
export { SharedLimit } from "./shared_limit.ts";
