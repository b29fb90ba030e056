/**
 * The design-code backend: the HTTP client of the backend internal API
 * (`BACKEND_INTERNAL_URL`), and the pieces the six design-code tools in
 * `tools/` share — input fields, project-scope checks, failure messages and
 * result shapes.
 *
 * Source: the design-code HTTP I/O contract; summarised in the product contract, §6.
 *
 * @module
 */

export * from "./types.ts";
export * from "./backend_url.ts";
export * from "./interpret_response.ts";
export * from "./backend_client.ts";
export * from "./read_body.ts";
export * from "./snippet.ts";
export * from "./json_depth.ts";
export * from "./failure_message.ts";
export * from "./project_scope.ts";
export * from "./fields.ts";
export * from "./tool_results.ts";
export * from "./call_backend.ts";
export * from "./list_page.ts";
export * from "./detail_record.ts";
export * from "./run_list.ts";
export * from "./run_detail.ts";
export * from "./tool_annotations.ts";
