import { strictEqual } from "node:assert";
import { jsonNestingExceeds } from "./json_depth.ts";

Deno.test("jsonNestingExceeds() counts nesting outside strings only", () => {
  strictEqual(jsonNestingExceeds('{"a":[1,{"b":[]}]}', 4), false);
  strictEqual(jsonNestingExceeds('{"a":[1,{"b":[]}]}', 3), true);
  strictEqual(jsonNestingExceeds('"[[[[[[[["', 1), false, "brackets in a string");
  strictEqual(
    jsonNestingExceeds('["\\"[[[[", []]', 1),
    true,
    "an escaped quote does not end the string",
  );
  strictEqual(jsonNestingExceeds('["\\\\", [[]]]', 2), true, "an escaped backslash does");
  strictEqual(jsonNestingExceeds("[]".repeat(100_000), 1), false, "siblings are not nesting");
});

Deno.test("jsonNestingExceeds() scans four million levels without recursion", () => {
  const n = 4_000_000;
  strictEqual(jsonNestingExceeds("[".repeat(n) + "]".repeat(n), 256), true);
  strictEqual(jsonNestingExceeds("[".repeat(n) + "]".repeat(n), n), false);
});
