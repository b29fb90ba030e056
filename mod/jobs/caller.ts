/**
 * Who a call is, as an owner of jobs: its API key over HTTP, this process
 * over stdio, and the project its key is bound to (see `canSee`).
 *
 * @module
 */

import type { Scope } from "../mcp/tool.ts";
import type { JobOwner } from "./types.ts";

/** Who owns the jobs of a call: its API key over HTTP, this process over stdio. */
export function ownerOf(scope: Scope | undefined): string {
  return scope ? `key:${scope.keyPrefix}` : `stdio:${Deno.pid}`;
}

/** The caller as an owner of jobs: its owner name and its key's project. */
export function callerOf(scope: Scope | undefined): JobOwner {
  return { owner: ownerOf(scope), project: scope?.projectId ?? null };
}
