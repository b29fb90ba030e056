/**
 * Authorization of a tool call by the caller's key scope: `read` keys may
 * call only read-only tools, `write` keys every tool. (A key bound to a
 * project may act only on that project: the tools that take a project check
 * it before any I/O, see `mod/backend/project_scope.ts`.) Over stdio there
 * is no scope and everything is allowed (the process is local). `tools/list`
 * shows a key exactly the tools it may call, so a model is never offered one
 * that can only refuse it.
 *
 * @module
 */

import type { Scope } from "./tool.ts";

/**
 * Whether `scope` may call a tool whose `readOnlyHint` is `readOnlyTool`.
 * Returns null when allowed, else the reason (for a tool error). `undefined`
 * scope (stdio) is always allowed.
 */
export function checkToolScope(scope: Scope | undefined, readOnlyTool: boolean): string | null {
  if (scope === undefined || readOnlyTool || scope.permission === "write") return null;
  return `API key ${scope.keyPrefix} has read permission; this tool is not read-only and needs a key with write permission`;
}

/** The tools `scope` may call, in their order (all of them over stdio). */
export function toolsForScope<T extends { annotations: { readOnlyHint: boolean } }>(
  scope: Scope | undefined,
  tools: readonly T[],
): T[] {
  return tools.filter((tool) => checkToolScope(scope, tool.annotations.readOnlyHint) === null);
}
