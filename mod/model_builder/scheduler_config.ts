/**
 * The SD 1.5 scheduler config the test-sized sets carry: the product's
 * (`mod/convert/sd15_scheduler.ts`, what a converted set gets), not a copy.
 *
 * @module
 */

export {
  SD15_SCHEDULER_CONFIG as SCHEDULER_CONFIG,
  SD15_SCHEDULER_CONFIG_JSON as SCHEDULER_CONFIG_JSON,
} from "../convert/sd15_scheduler.ts";
