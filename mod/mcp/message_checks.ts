/**
 * The checks every incoming MCP message passes before the SDK sees it, the
 * same over stdio and HTTP: the JSON budget ({@link scanJson}) before
 * `JSON.parse`, no JSON-RPC batches, and the 1 MiB limit for everything but
 * a `tools/call` of an image-input tool.
 *
 * @module
 */

import { scanJson } from "./json_budget.ts";
import { IMAGE_INPUT_TOOLS, MAX_SMALL_MESSAGE_BYTES } from "./limits.ts";

/** A message that passed, or the JSON-RPC error (and HTTP status) to answer with. */
export type CheckedMessage =
  | { ok: true; message: unknown }
  | { ok: false; code: number; status: number; error: string; id: string | number | null };

const decoder = new TextDecoder();

function idOf(message: unknown): string | number | null {
  const id = (message as { id?: unknown } | null)?.id;
  return typeof id === "string" || typeof id === "number" ? id : null;
}

/** Parses and checks one message body / stdio line; see the module documentation. */
export function checkMessage(bytes: Uint8Array): CheckedMessage {
  const overBudget = scanJson(bytes);
  if (overBudget !== null) {
    return { ok: false, code: -32600, status: 400, error: overBudget, id: null };
  }
  let message: unknown;
  try {
    message = JSON.parse(decoder.decode(bytes));
  } catch (error) {
    return {
      ok: false,
      code: -32700,
      status: 400,
      error: `parse error: ${(error as Error).message}`,
      id: null,
    };
  }
  if (Array.isArray(message)) {
    // JSON-RPC batching was removed from MCP in 2025-06-18 (changelog); one
    // batch could otherwise fan out into any number of calls.
    return {
      ok: false,
      code: -32600,
      status: 400,
      error: "invalid request: JSON-RPC batches are not supported (removed in MCP 2025-06-18); " +
        "send one message per request",
      id: null,
    };
  }
  if (bytes.length > MAX_SMALL_MESSAGE_BYTES) {
    const m = message as { method?: unknown; params?: { name?: unknown } } | null;
    const name = m?.method === "tools/call" ? m.params?.name : undefined;
    if (typeof name !== "string" || !IMAGE_INPUT_TOOLS.includes(name)) {
      return {
        ok: false,
        code: -32600,
        status: 413,
        error: `a message of ${bytes.length} bytes is over the ${MAX_SMALL_MESSAGE_BYTES}-byte ` +
          `limit; only tools/call of ${IMAGE_INPUT_TOOLS.join(" and ")} may be larger`,
        id: idOf(message),
      };
    }
  }
  return { ok: true, message };
}
