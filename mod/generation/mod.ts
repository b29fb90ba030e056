/**
 * What the image tools share: input rules, the generation service, and
 * the storable request each call becomes.
 *
 * @module
 */

export * from "./inputs.ts";
export { ImageService, pngContent } from "./service.ts";
export { isBatch, runImageRequest } from "./request.ts";
export {
  checkImageRequest,
  CONTROL_MODES,
  REQUEST_MODES,
  RequestCheckError,
} from "./request_check.ts";
export type { AddIssue, RequestMode, RequestRules } from "./request_check.ts";
export type {
  ImageRequest,
  ImageToolName,
  RequestProgress,
  RunHooks,
  RunOutcome,
} from "./request.ts";
export type {
  BaseFields,
  ImageJob,
  ImageOutcome,
  ImageRunOptions,
  ImageServiceOptions,
} from "./service.ts";
