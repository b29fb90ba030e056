/**
 * A loopback TCP relay that adds the API-key headers to every HTTP request
 * it passes on, for third-party clients that cannot send headers of their
 * own (the MCP conformance suite takes only a URL). Everything else goes
 * through byte for byte, `Host` and `Origin` included, so the server's
 * DNS-rebinding checks see what the client sent. The server answers one
 * request per connection (`connection: close`), so the headers go after the
 * request line of each connection's first request.
 *
 * ```sh
 * deno run --allow-net --allow-read --allow-env=RELAY_HEADERS .ci/key_relay.ts TARGET_PORT_FILE
 * ```
 *
 * Prints `relay listening on <port>` once listening; forwards to the port
 * written in TARGET_PORT_FILE (read per connection, so the relay can start
 * before the server). RELAY_HEADERS holds the lines to add (`Name: value`,
 * newline-separated).
 *
 * @module
 */

const [portFile] = Deno.args;
if (!portFile) {
  console.error("usage: key_relay.ts TARGET_PORT_FILE");
  Deno.exit(2);
}
const headers = (Deno.env.get("RELAY_HEADERS") ?? "").split("\n").filter((l) => l.includes(":"));
const added = new TextEncoder().encode(headers.map((l) => `${l.trim()}\r\n`).join(""));

async function pipe(from: Deno.Conn, to: Deno.Conn): Promise<void> {
  try {
    await from.readable.pipeTo(to.writable);
  } catch {
    // One side closed: the other is closed below.
  }
}

async function relay(client: Deno.Conn): Promise<void> {
  const port = Number((await Deno.readTextFile(portFile)).trim());
  const server = await Deno.connect({ hostname: "127.0.0.1", port });
  // The request line, then the added headers, then the rest as it comes.
  const reader = client.readable.getReader();
  const writer = server.writable.getWriter();
  let head = new Uint8Array();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    const joined = new Uint8Array(head.length + value.length);
    joined.set(head);
    joined.set(value, head.length);
    head = joined;
    const eol = head.indexOf(0x0a);
    if (eol !== -1) {
      await writer.write(head.subarray(0, eol + 1));
      await writer.write(added);
      await writer.write(head.subarray(eol + 1));
      break;
    }
  }
  writer.releaseLock();
  reader.releaseLock();
  await Promise.all([
    pipe(client, server).finally(() => server.close()),
    pipe(server, client).finally(() => {
      try {
        client.close();
      } catch { /* closed */ }
    }),
  ]).catch(() => {});
}

const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
console.log(`relay listening on ${(listener.addr as Deno.NetAddr).port}`);
for await (const conn of listener) {
  relay(conn).catch(() => {
    try {
      conn.close();
    } catch { /* closed */ }
  });
}
