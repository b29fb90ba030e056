/**
 * MCP plumbing: the tool, resource and task interfaces, extensions, the
 * server factory, the stdio transport and the SDK door.
 *
 * @module
 */

export * from "./tool.ts";
export { RESOURCE_NOT_FOUND } from "./resource.ts";
export type {
  ResourceDefinition,
  ResourceTemplateDefinition,
  TemplateResourceContents,
} from "./resource.ts";
export { toolMetaFor } from "./extension.ts";
export type { ClientExtensionCapabilities, McpExtension } from "./extension.ts";
export { createMcpServer, SERVER_INFO } from "./server.ts";
export { checkToolScope } from "./tool_scope.ts";
export type { McpServerOptions } from "./server.ts";
export { TASK_POLL_INTERVAL_MS, TASKS_EXTENSION_ID } from "./tasks.ts";
export type { ProtocolEra, TaskBackend, TaskCancelOutcome, TaskState, TaskView } from "./tasks.ts";
export { DenoStdioTransport, serveStdioConnection } from "./stdio.ts";
export type { DenoStdioOptions, StdioConnection } from "./stdio.ts";
export { watchParent } from "./parent_watch.ts";
export type { ParentWatch, ParentWatchOptions } from "./parent_watch.ts";
export { MAX_IMAGE_BASE64_LENGTH, MAX_REQUEST_BYTES } from "./limits.ts";
export { formatValidationError } from "./validation.ts";
export type { McpMessage, McpServer, McpTransport } from "./sdk.ts";
