/**
 * The tool registry: the image and job tools always, the design-code tools only when
 * `BACKEND_INTERNAL_URL` is configured.
 *
 * @module
 */

import { withGalleryView } from "../mod/apps/mod.ts";
import { createBackendClient } from "../mod/backend/mod.ts";
import type { ResolvedConfig } from "../mod/config/mod.ts";
import type { ImageService } from "../mod/generation/mod.ts";
import type { JobService } from "../mod/jobs/mod.ts";
import type { ToolDefinition } from "../mod/mcp/mod.ts";
import { createCancelGenerationTool } from "./cancel_generation.ts";
import { createDesignCodeTools } from "./design_code.ts";
import { createGenerateGuidedImageTool } from "./generate_guided_image.ts";
import { createGenerateImageTool } from "./generate_image.ts";
import { createGetGenerationTool } from "./get_generation.ts";
import { createInpaintImageTool } from "./inpaint_image.ts";
import { createListGenerationsTool } from "./list_generations.ts";
import { createTransformImageTool } from "./transform_image.ts";
import { createUpscaleImageTool } from "./upscale_image.ts";

/**
 * The tools whose results the MCP Apps gallery view shows (`_meta.ui.resourceUri`):
 * every tool that returns images, and the job tools that return a job's images or
 * progress. A new image tool joins this list.
 */
export const GALLERY_TOOLS: readonly string[] = [
  "generate_image",
  "generate_guided_image",
  "inpaint_image",
  "transform_image",
  "upscale_image",
  "get_generation",
  "list_generations",
];

/**
 * The tools whose calls may run as tasks (`execution.taskSupport:
 * "optional"`): the ones that start a generation job. A task IS that job; the
 * client polls it instead of holding the call open (mod/mcp/tasks.ts).
 */
export const TASK_TOOLS: readonly string[] = [
  "generate_image",
  "generate_guided_image",
  "inpaint_image",
  "transform_image",
  "upscale_image",
];

/** Builds every tool this configuration serves, in listing order. */
export function createTools(
  config: ResolvedConfig,
  images: ImageService,
  jobs: JobService,
): ToolDefinition[] {
  const tools: ToolDefinition[] = [
    createGenerateImageTool({ images, jobs, maxCount: config.generation.maxCount }),
    createGenerateGuidedImageTool({ images, jobs, controlnet: config.controlnet }),
    createInpaintImageTool({ images, jobs, inpaint: config.controlnet.inpaint }),
    createTransformImageTool({ images, jobs }),
    createUpscaleImageTool({ images, jobs }),
    createGetGenerationTool({ jobs, maxWaitMs: config.generation.maxWaitMs }),
    createCancelGenerationTool({ jobs }),
    createListGenerationsTool({ jobs }),
  ] as ToolDefinition[];
  if (config.backend) {
    const backend = createBackendClient({
      baseUrl: config.backend.url,
      apiKey: config.backend.apiKey,
      timeoutMs: config.backend.timeoutMs,
      maxResponseBytes: config.backend.maxResponseBytes,
    });
    tools.push(...(createDesignCodeTools(backend) as ToolDefinition[]));
  }
  return tools
    .map((tool) => GALLERY_TOOLS.includes(tool.name) ? withGalleryView(tool) : tool)
    .map((tool) =>
      TASK_TOOLS.includes(tool.name) ? { ...tool, execution: { taskSupport: "optional" } } : tool
    );
}
