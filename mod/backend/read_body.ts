/**
 * Reads a backend response body with a byte cap (without one, a 200 MB body
 * cost 830 MB of memory). A `Content-Length` over the cap is refused before
 * reading; otherwise bytes are counted as they arrive and the stream is
 * cancelled as soon as the cap is passed, so at most `maxBytes` plus one
 * chunk is ever held.
 *
 * @module
 */

/** Default cap of a backend answer: 8 MiB (`[backend] max_response_bytes`). */
export const DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024;

/** The body as text, or how far it got before passing the cap. */
export type CappedBody =
  | { ok: true; text: string }
  | { ok: false; maxBytes: number; declared?: number; read?: number };

/**
 * Reads `response`'s body as UTF-8 text (invalid bytes become U+FFFD, as
 * `Response.text()` does) unless it is longer than `maxBytes`.
 *
 * @param response The response; its body is consumed or cancelled.
 * @param maxBytes The cap, in bytes.
 * @returns The text, or the refusal with the declared or read size.
 */
export async function readCappedText(response: Response, maxBytes: number): Promise<CappedBody> {
  const declared = Number(response.headers.get("content-length"));
  if (Number.isSafeInteger(declared) && declared > maxBytes) {
    await response.body?.cancel().catch(() => {});
    return { ok: false, maxBytes, declared };
  }
  if (response.body === null) return { ok: true, text: "" };
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let read = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    read += value.byteLength;
    if (read > maxBytes) {
      await reader.cancel().catch(() => {});
      return { ok: false, maxBytes, read };
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(read);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return { ok: true, text: new TextDecoder().decode(bytes) };
}
