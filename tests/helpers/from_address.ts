/**
 * Raw HTTP/1.1 over TCP from a chosen loopback address (127.0.0.2, …), so
 * that tests can be several clients at once: `Deno.connect` cannot bind a
 * local address, `node:net` can. On Linux the whole 127.0.0.0/8 is local.
 *
 * @module
 */

import net from "node:net";

/** A connected socket from `from` to 127.0.0.1:`port`; rejects when the connect fails. */
export function openFrom(from: string, port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: "127.0.0.1", port, localAddress: from });
    socket.once("connect", () => {
      socket.off("error", reject);
      socket.on("error", () => {}); // reported by whoever reads it
      resolve(socket);
    });
    socket.once("error", reject);
  });
}

/** Everything the peer sends until it closes (or `timeoutMs`), as text. */
export function readToEnd(socket: net.Socket, timeoutMs = 15_000): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(Buffer.concat(chunks).toString("latin1"));
    };
    const timer = setTimeout(done, timeoutMs);
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.once("end", done);
    socket.once("close", done);
    socket.once("error", done);
  });
}

/** A parsed raw response. */
export interface RawResponse {
  /** The status code, or 0 when nothing (or no status line) came back. */
  status: number;
  /** Header lines as `[name in lower case, value]`, in order. */
  headers: Array<[string, string]>;
  /** The body bytes as text. */
  body: string;
}

/** Parses what {@link readToEnd} returned. */
export function parseResponse(text: string): RawResponse {
  const end = text.indexOf("\r\n\r\n");
  const head = end === -1 ? text : text.slice(0, end);
  const [line, ...rest] = head.split("\r\n");
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(line)?.[1] ?? 0);
  const headers = rest.map((l): [string, string] => {
    const colon = l.indexOf(":");
    return [l.slice(0, colon).trim().toLowerCase(), l.slice(colon + 1).trim()];
  });
  return { status, headers, body: end === -1 ? "" : text.slice(end + 4) };
}

/**
 * Sends one request from `from` and reads the whole answer. `headers` go
 * after the request line; a body gets its `content-length`.
 */
export async function requestFrom(
  from: string,
  port: number,
  request: { method: string; path: string; headers?: Record<string, string>; body?: string },
  timeoutMs = 15_000,
): Promise<RawResponse> {
  let socket: net.Socket;
  try {
    socket = await openFrom(from, port);
  } catch {
    return { status: 0, headers: [], body: "" };
  }
  const body = request.body ?? "";
  const lines = [
    `${request.method} ${request.path} HTTP/1.1`,
    "host: 127.0.0.1",
    ...Object.entries(request.headers ?? {}).map(([k, v]) => `${k}: ${v}`),
    ...(body ? [`content-length: ${Buffer.byteLength(body)}`] : []),
  ];
  const reading = readToEnd(socket, timeoutMs);
  socket.write(lines.join("\r\n") + "\r\n\r\n" + body);
  return parseResponse(await reading);
}

/** A JSON-RPC POST /mcp from loopback address `from` with API key `key` (`body` as JSON text). */
export function mcpPostFrom(
  from: string,
  port: number,
  key: string,
  body: string,
  timeoutMs = 15_000,
): Promise<RawResponse> {
  return requestFrom(from, port, {
    method: "POST",
    path: "/mcp",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-api-key": key,
    },
    body,
  }, timeoutMs);
}
