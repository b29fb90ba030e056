import assert from "node:assert/strict";
import {
  bodyLength,
  CLIENT_ADDRESS_HEADER,
  forwardedHead,
  parseRequestHead,
} from "./request_head.ts";

const bytes = (text: string) => Uint8Array.from(text, (c) => c.charCodeAt(0));
const text = (b: Uint8Array) => String.fromCharCode(...b);

Deno.test("parseRequestHead: request line, raw lines and lower-case headers; bytes 0x80-0xFF kept", () => {
  const head = parseRequestHead(
    bytes("POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\nX-Name: caf\xe9\x85\r\n"),
  );
  assert.ok(!("problem" in head));
  assert.equal(head.requestLine, "POST /mcp HTTP/1.1");
  assert.deepEqual(head.headers, [["host", "a"], ["content-length", "12"], [
    "x-name",
    "caf\xe9\x85",
  ]]);
  assert.equal(bodyLength(head.headers), 12);
});

Deno.test("parseRequestHead: a folded line or a request line that is not HTTP/1.x is a problem to answer", () => {
  const folded = parseRequestHead(bytes("GET / HTTP/1.1\r\nx-a: b\r\n c\r\n"));
  assert.ok("problem" in folded && /obs-fold/.test(folded.problem));
  const h2 = parseRequestHead(bytes("PRI * HTTP/2.0\r\n"));
  assert.ok("problem" in h2 && /not HTTP\/1\.0 or HTTP\/1\.1/.test(h2.problem));
});

Deno.test("bodyLength: content-length, chunked as Infinity, none as 0", () => {
  assert.equal(bodyLength([["transfer-encoding", "gzip, chunked"]]), Infinity);
  assert.equal(bodyLength([["content-length", "x"]]), 0);
  assert.equal(bodyLength([]), 0);
});

Deno.test("forwardedHead: the client's connection, keep-alive and address headers replaced by the guard's", () => {
  const head = parseRequestHead(
    bytes(
      `GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\nKeep-Alive: 5\r\n` +
        `${CLIENT_ADDRESS_HEADER}: 6.6.6.6\r\nX-\xff: 1\r\n`,
    ),
  );
  assert.ok(!("problem" in head));
  assert.equal(
    text(forwardedHead(head, "127.0.0.2")),
    `GET / HTTP/1.1\r\nHost: a\r\nX-\xff: 1\r\nconnection: close\r\n` +
      `${CLIENT_ADDRESS_HEADER}: 127.0.0.2\r\n\r\n`,
  );
});
