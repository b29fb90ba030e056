/**
 * Normalizes a backend detail payload into the `{ design }` / `{ code }`
 * result of `get-design-detail` / `get-code-detail`.
 *
 * Source: the design-code HTTP I/O contract, "Detail 成功": "get-design-detail は
 * { "design": { ... } } を返す。get-code-detail は { "code": { ... } } を返す。
 * Vector embedding fields は AI-v2 / backend internal read path で省略する".
 *
 * @module
 */

/** Top-level field names treated as vector embeddings. */
const EMBEDDING_KEY = /embedding/i;

/**
 * Returns the record to wrap as `{ [key]: record }`.
 *
 * The backend may send the record itself or already wrapped as
 * `{ design: {...} }`; both are accepted. Top-level fields whose name
 * contains "embedding" are dropped: the contract says the read path omits
 * them, and this keeps a backend that forgets from flooding the model's
 * context with float arrays.
 *
 * @param data The unwrapped backend payload.
 * @param key `design` or `code`.
 * @returns The record, or why the payload cannot be used.
 */
export function toDetailRecord(
  data: unknown,
  key: "design" | "code",
): { ok: true; record: Record<string, unknown> } | { ok: false; message: string } {
  if (!isRecord(data)) {
    return {
      ok: false,
      message: `Invalid backend response: expected a ${key} object, got ${
        data === null ? "null" : Array.isArray(data) ? "an array" : typeof data
      }`,
    };
  }
  const keys = Object.keys(data);
  const inner = keys.length === 1 && keys[0] === key && isRecord(data[key]) ? data[key] : data;
  const record: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(inner)) {
    if (!EMBEDDING_KEY.test(name)) record[name] = value;
  }
  return { ok: true, record };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
