/**
 * Project-scope checks the design-code tools run before any backend I/O.
 *
 * Source: the design-code HTTP I/O contract — "backend internal API I/O 前に
 * authenticated project/user scope を強制する" and the scenario "project/user
 * scope mismatch → MCP `isError: true`, backend internal API は呼び出さない".
 * A design id is composite: `<project_id>_<file_id>_<node_id>`, as in the
 * contract's `design-import` payload (`"project_id": 42`, `"design_id":
 * "42_hDDA9BNori9OTXSClduXqR_40002029:37033"`).
 *
 * @module
 */

import type { Scope } from "../mcp/tool.ts";

/**
 * The project number a design id starts with: the digits before its first
 * `_`, exactly as written, or `undefined` when it does not start that way.
 *
 * @param designId A design id, e.g. `42_hDDA9BNori9OTXSClduXqR_40002029:37033`.
 * @returns `"42"` for the example.
 */
export function designProjectNumber(designId: string): string | undefined {
  const match = /^(\d+)_/.exec(designId);
  return match ? match[1] : undefined;
}

/**
 * Checks a `project_id` argument against the caller's key.
 *
 * @param scope The caller's scope; `undefined` over stdio.
 * @param projectId The `project_id` argument.
 * @returns Why the call is refused, or `undefined` when it may proceed (no
 *   scope, a key bound to no project, or the same project).
 */
export function projectScopeRefusal(
  scope: Scope | undefined,
  projectId: number,
): string | undefined {
  if (scope === undefined || scope.projectId === null) return undefined;
  if (projectId === scope.projectId) return undefined;
  return `project_id ${projectId} is outside this API key's scope: the key is bound to ` +
    `project ${scope.projectId}`;
}

/**
 * Checks a `design_id` argument against the caller's key: with a key bound to
 * project P the id must start with `P_`. Fails closed: an id that does not
 * start with a project number cannot be shown to belong to P, so it is
 * refused too. The digits are compared as written (`042_…` is not project 42).
 *
 * @param scope The caller's scope; `undefined` over stdio.
 * @param designId The `design_id` argument.
 * @returns Why the call is refused, or `undefined` when it may proceed.
 */
export function designScopeRefusal(
  scope: Scope | undefined,
  designId: string,
): string | undefined {
  if (scope === undefined || scope.projectId === null) return undefined;
  const expected = String(scope.projectId);
  const found = designProjectNumber(designId);
  if (found === expected) return undefined;
  if (found === undefined) {
    return `design_id ${JSON.stringify(designId)} does not start with a project number ` +
      `("<project_id>_…"), so it cannot be checked against this API key's project ${expected}`;
  }
  return `design_id ${JSON.stringify(designId)} belongs to project ${found}, outside this ` +
    `API key's scope: the key is bound to project ${expected}`;
}

/**
 * Second guard after a detail read: refuses a record whose own integer
 * `project_id` is not the key's project, so a backend that skipped its scope
 * check cannot leak another project's data through this server. A record
 * without an integer `project_id` passes (the backend already checked it
 * against `X-MCP-Project-ID`).
 *
 * @param scope The caller's scope; `undefined` over stdio.
 * @param record The record the backend returned.
 * @param noun What the record is, for the message (`design`, `code`).
 * @returns Why the result is withheld, or `undefined`.
 */
export function recordScopeRefusal(
  scope: Scope | undefined,
  record: Readonly<Record<string, unknown>>,
  noun: string,
): string | undefined {
  if (scope === undefined || scope.projectId === null) return undefined;
  const projectId = record.project_id;
  if (!Number.isSafeInteger(projectId) || projectId === scope.projectId) return undefined;
  return `Scope validation failed: the backend returned a ${noun} of project ${projectId}, ` +
    `outside this API key's scope (project ${scope.projectId})`;
}
