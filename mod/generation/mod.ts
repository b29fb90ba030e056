/**
 * What the three image tools share: input rules and the generation service.
 *
 * @module
 */

export * from "./inputs.ts";
export { ImageService, pngContent, singleImageResult } from "./service.ts";
export type {
  BaseFields,
  ImageJob,
  ImageOutcome,
  ImageRunOptions,
  ImageServiceOptions,
} from "./service.ts";
