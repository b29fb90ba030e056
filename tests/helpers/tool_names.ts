/**
 * The tool names `tools/list` must show, in the order it shows them (the
 * contract's tool list), for the end-to-end tests over stdio and HTTP.
 *
 * @module
 */

/** The image tools and the job tools: what every server lists. */
export const IMAGE_TOOL_NAMES: readonly string[] = [
  "generate_image",
  "generate_guided_image",
  "inpaint_image",
  "transform_image",
  "upscale_image",
  "get_generation",
  "cancel_generation",
  "list_generations",
];

/** The design-code tools, listed after {@link IMAGE_TOOL_NAMES} when a backend is configured. */
export const DESIGN_CODE_TOOL_NAMES: readonly string[] = [
  "trigger-des2code",
  "get-des2code",
  "list-designs",
  "list-code",
  "get-design-detail",
  "get-code-detail",
];
