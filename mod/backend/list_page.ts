/**
 * Normalizes a backend list payload into the `list-designs` / `list-code`
 * result of the contract.
 *
 * Source: the design-code HTTP I/O contract, "`list-designs` / `list-code` 成功":
 * `{ project_id, organization_id, total_count, returned_count, limit, offset, items }`.
 * The backend proxies AI-v2 compact metadata and its exact payload is not
 * pinned down, so a plain array, `{ items }`, `{ <plural> }` (`designs`,
 * `codes`, `code`) and `{ results }` are all accepted.
 *
 * @module
 */

import { snippet } from "./snippet.ts";

/** The list arguments after validation (defaults applied). */
export interface ListArguments {
  /** Project to list (integer > 0); must match a project-bound key's project. */
  project_id: number;
  /** Organization (tenant) to narrow the list to; absent when not given. */
  organization_id?: number;
  /** Page size, 1-100 (default 20). */
  limit: number;
  /** Items to skip, >= 0 (default 0). */
  offset: number;
}

/** The contract's list result. */
export interface ListPage {
  /** Lets the page serve as MCP `structuredContent` (a plain JSON object). */
  [key: string]: unknown;
  /** The project listed, echoed from the arguments. */
  project_id: number;
  /** The organization filter, or null when none was given. */
  organization_id: number | null;
  /** Items across all pages: the backend's `total_count` (or `total`), else `items.length`. */
  total_count: number;
  /** Items in this page (`items.length`). */
  returned_count: number;
  /** The page size used. */
  limit: number;
  /** The offset used. */
  offset: number;
  /** The backend's items, unchanged. */
  items: unknown[];
}

/**
 * Builds the list result.
 *
 * `total_count` is the backend's `total_count` (or `total`), else the number
 * of items; `limit` and `offset` are the backend's when it reports integers
 * (it may clamp), else the request's; `organization_id` is the argument, else
 * the backend's, else `null`.
 *
 * @param data The unwrapped backend payload.
 * @param args The validated arguments.
 * @param itemKeys Keys that may hold the item array, in order of preference.
 * @returns The page, or why the payload cannot be used.
 */
export function toListPage(
  data: unknown,
  args: ListArguments,
  itemKeys: readonly string[],
): { ok: true; page: ListPage } | { ok: false; message: string } {
  let items: unknown[] | undefined;
  let fields: Record<string, unknown> = {};
  if (Array.isArray(data)) {
    items = data;
  } else if (typeof data === "object" && data !== null) {
    fields = data as Record<string, unknown>;
    for (const key of ["items", ...itemKeys, "results"]) {
      const value = fields[key];
      if (Array.isArray(value)) {
        items = value;
        break;
      }
    }
  }
  if (items === undefined) {
    const keys = ["items", ...itemKeys, "results"].map((key) => `"${key}"`).join(", ");
    return {
      ok: false,
      message: `Invalid backend response: expected a list, or an object with an array in ` +
        `${keys}, got ${describe(data)}`,
    };
  }
  const total = countField(fields.total_count) ?? countField(fields.total) ?? items.length;
  return {
    ok: true,
    page: {
      project_id: args.project_id,
      organization_id: args.organization_id ?? positiveField(fields.organization_id) ?? null,
      total_count: total,
      returned_count: items.length,
      limit: positiveField(fields.limit) ?? args.limit,
      offset: countField(fields.offset) ?? args.offset,
      items,
    },
  };
}

function countField(value: unknown): number | undefined {
  return Number.isSafeInteger(value) && (value as number) >= 0 ? value as number : undefined;
}

function positiveField(value: unknown): number | undefined {
  return Number.isSafeInteger(value) && (value as number) > 0 ? value as number : undefined;
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (typeof value !== "object") return typeof value;
  const keys = Object.keys(value);
  if (keys.length === 0) return "an empty object";
  // Backend key names are quoted as bounded snippets, at most ten of them.
  const shown = keys.slice(0, 10).map((key) => snippet(key, 40)).join(", ");
  return `an object with keys ${shown}${keys.length > 10 ? ` and ${keys.length - 10} more` : ""}`;
}
