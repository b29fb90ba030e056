import assert from "node:assert/strict";
import { MESSAGE_JSON_BUDGET, scanJson } from "./json_budget.ts";

const enc = (s: string) => new TextEncoder().encode(s);

Deno.test("scanJson passes ordinary messages and big strings", () => {
  const call = JSON.stringify({
    jsonrpc: "2.0",
    id: 1,
    method: "tools/call",
    params: {
      name: "x",
      arguments: { a: [1, 2.5e3, true, null, 'q"\\'], b: "A".repeat(1_000_000) },
    },
  });
  assert.equal(scanJson(enc(call)), null);
});

Deno.test("scanJson counts values exactly at the limit", () => {
  const budget = { maxValues: 5, maxDepth: 64 };
  // {"a":[1,true]} is: object, key, array, 1, true = 5 values.
  assert.equal(scanJson(enc(`{"a":[1,true]}`), budget), null);
  assert.match(scanJson(enc(`{"a":[1,true,null]}`), budget)!, /more than 5 values/);
});

Deno.test("scanJson refuses 24-million-object style bodies before parsing", () => {
  const body = enc(
    `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"x":[` +
      "{},".repeat(200_000) + `{}]}}}`,
  );
  assert.match(scanJson(body)!, /more than 100,000 values/);
});

Deno.test("scanJson refuses nesting deeper than the budget, counting only outside strings", () => {
  const deep = (n: number) => "[".repeat(n) + "]".repeat(n);
  assert.equal(scanJson(enc(deep(MESSAGE_JSON_BUDGET.maxDepth))), null);
  assert.match(scanJson(enc(deep(MESSAGE_JSON_BUDGET.maxDepth + 1)))!, /deeper than 64 levels/);
  // Brackets and escaped quotes inside strings are not structure.
  assert.equal(scanJson(enc(JSON.stringify({ s: '[[[["{{{{'.repeat(100) + "\\" }))), null);
  assert.equal(scanJson(enc(JSON.stringify(["\\\\\\", "[".repeat(100)]))), null);
});

Deno.test("scanJson leaves malformed JSON to JSON.parse", () => {
  assert.equal(scanJson(enc(`{"unterminated`)), null);
});
