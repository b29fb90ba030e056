import { deepStrictEqual, ok, strictEqual } from "node:assert";
import { backendSuccessResult, MAX_INDENTED_CHARS } from "./tool_results.ts";

Deno.test("backendSuccessResult() indents small results and sends large ones compact", () => {
  const small = backendSuccessResult("Found 1", { items: [{ a: 1 }] }, true);
  strictEqual(
    small.content[1].type === "text" && small.content[1].text,
    '{\n  "items": [\n    {\n      "a": 1\n    }\n  ]\n}',
  );
  // Deep and wide: indented, this would be hundreds of MB of spaces.
  let nested: unknown = Array.from({ length: 20_000 }, (_, i) => i);
  for (let i = 0; i < 200; i++) nested = [nested];
  const large = backendSuccessResult("Found many", { items: nested as unknown[] }, true);
  const text = large.content[1].type === "text" ? large.content[1].text : "";
  ok(text.length > MAX_INDENTED_CHARS);
  strictEqual(text, JSON.stringify({ items: nested }));
  deepStrictEqual(large.structuredContent, { items: nested });
});
