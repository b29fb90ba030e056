/**
 * Authorization of a tool call by the caller's key scope (issue 5 item 6):
 * `read` keys may call only read-only tools, `write` keys every tool, and a
 * key bound to a project may act only on that project. Over stdio there is
 * no scope and everything is allowed (the process is local).
 *
 * @module
 */

import type { Scope } from "../mcp/tool.ts";

/**
 * Whether `scope` may call a tool whose `readOnlyHint` is `readOnlyTool`.
 * Returns null when allowed, else the reason (for a tool error). `undefined`
 * scope (stdio) is always allowed.
 */
export function checkToolScope(scope: Scope | undefined, readOnlyTool: boolean): string | null {
  if (scope === undefined || readOnlyTool || scope.permission === "write") return null;
  return `API key ${scope.keyPrefix} has read permission; this tool is not read-only and needs a key with write permission`;
}

/**
 * Whether `scope` may act on `projectId`. Returns null when allowed (stdio,
 * an unbound key, or the key's own project), else the reason (for a tool
 * error, raised before any backend or pipeline work).
 */
export function checkProjectScope(scope: Scope | undefined, projectId: number): string | null {
  if (scope === undefined || scope.projectId === null || scope.projectId === projectId) return null;
  return `API key ${scope.keyPrefix} is bound to project ${scope.projectId} and may not act on project ${projectId}`;
}
