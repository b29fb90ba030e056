/**
 * The request head as the connection guard (connection_guard.ts) reads and
 * forwards it: the request line and header lines of an HTTP/1.x head, read
 * byte for byte (ISO 8859-1, so that any byte a client sent reaches the
 * server unchanged), and the head the server gets: the client's lines less
 * `connection`, `keep-alive` and the client-address header, then
 * `connection: close` (one request per connection) and the client's address.
 * HTTP/2 with prior knowledge and folded header lines (obs-fold, RFC 9112
 * §5.2) are refused.
 *
 * @module
 */

/**
 * The request header the guard tells the server the client's address in.
 * It replaces any the client sent, so the server can trust it.
 */
export const CLIENT_ADDRESS_HEADER = "x-sd15-client-address";

/** Headers the guard removes from a request head before adding its own. */
const REPLACED_HEADERS = new Set(["connection", "keep-alive", CLIENT_ADDRESS_HEADER]);

/**
 * Bytes as a string of one code point per byte (ISO 8859-1). Not
 * `TextDecoder("latin1")`, which is windows-1252 (WHATWG Encoding) and maps
 * 0x80–0x9F elsewhere, so its text would not turn back into the same bytes.
 */
function byteText(bytes: Uint8Array): string {
  let out = "";
  for (let i = 0; i < bytes.length; i += 8192) {
    out += String.fromCharCode(...bytes.subarray(i, i + 8192));
  }
  return out;
}

/** `text` of {@link byteText} back to its bytes. */
function latin1Bytes(text: string): Uint8Array {
  const out = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) out[i] = text.charCodeAt(i);
  return out;
}

/** The header lines of a head (after the request line), or null when one is folded. */
function headerLines(lines: string[]): Array<[string, string]> | null {
  const out: Array<[string, string]> = [];
  for (const line of lines) {
    if (line === "") continue;
    if (line[0] === " " || line[0] === "\t") return null; // obs-fold (RFC 9112 §5.2)
    const colon = line.indexOf(":");
    if (colon <= 0) {
      out.push([line.toLowerCase(), ""]);
      continue;
    }
    out.push([line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()]);
  }
  return out;
}

/** A request head read: its request line, its raw header lines, and the headers by lower-case name. */
export interface RequestHead {
  /** The request line, e.g. `POST /mcp HTTP/1.1`. */
  requestLine: string;
  /** The header lines as sent, without the line ends. */
  lines: string[];
  /** `[lower-case name, trimmed value]` per header line. */
  headers: Array<[string, string]>;
}

/**
 * Reads a request head (its bytes up to the blank line). A problem is
 * returned, not thrown: the answer to send (`problem`) and the reason to log
 * (`why`).
 */
export function parseRequestHead(
  bytes: Uint8Array,
): RequestHead | { problem: string; why: string } {
  const lines = byteText(bytes).split("\n").map((l) => l.replace(/\r$/, ""));
  const headers = headerLines(lines.slice(1));
  if (headers === null) {
    return {
      problem: "the request head has a folded header line (obs-fold)",
      why: "folded header line",
    };
  }
  if (!/^[A-Za-z]+ \S+ HTTP\/1\.[01]$/.test(lines[0])) {
    return {
      problem: "the request line is not HTTP/1.0 or HTTP/1.1",
      why: "not an HTTP/1.x request",
    };
  }
  return { requestLine: lines[0], lines: lines.slice(1), headers };
}

/** The body bytes the head announces: `content-length`, Infinity when chunked, else 0. */
export function bodyLength(headers: Array<[string, string]>): number {
  let expected = 0;
  for (const [name, value] of headers) {
    if (name === "content-length" && /^\d+$/.test(value)) expected = Number(value);
    if (name === "transfer-encoding" && /chunked/i.test(value)) expected = Infinity;
  }
  return expected;
}

/** The head as the server gets it: the client's lines but the replaced ones, then the guard's. */
export function forwardedHead(head: RequestHead, address: string): Uint8Array {
  const kept = head.lines.filter((line) => {
    const colon = line.indexOf(":");
    return line !== "" &&
      !(colon > 0 && REPLACED_HEADERS.has(line.slice(0, colon).trim().toLowerCase()));
  });
  return latin1Bytes(
    [head.requestLine, ...kept, "connection: close", `${CLIENT_ADDRESS_HEADER}: ${address}`, "", ""]
      .join("\r\n"),
  );
}
