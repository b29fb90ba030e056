/**
 * Turns zod issues into field-level text a model can act on.
 *
 * @module
 */

import type { ZodIssue } from "./tool.ts";

/**
 * Formats validation issues as one message:
 * `invalid arguments for generate_image: size: …; count: …`.
 */
export function formatValidationError(tool: string, issues: ZodIssue[]): string {
  const parts = issues.map((issue) => {
    if (issue.code === "unrecognized_keys") {
      return `unknown argument${issue.keys.length > 1 ? "s" : ""} ${
        issue.keys.map((k) => `"${k}"`).join(", ")
      }`;
    }
    const field = issue.path.length ? issue.path.map(String).join(".") : "arguments";
    return `${field}: ${issue.message}`;
  });
  return `invalid arguments for ${tool}: ${parts.join("; ")}`;
}
