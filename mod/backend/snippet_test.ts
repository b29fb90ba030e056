import { ok, strictEqual } from "node:assert";
import { joinSnippets, MAX_MESSAGE_CHARS, snippet } from "./snippet.ts";

Deno.test("snippet() keeps short text (whitespace flattened) and cuts long text with a count", () => {
  strictEqual(snippet("design\n  not\tfound"), "design not found");
  const huge = "y".repeat(5_000_000);
  const cut = snippet(huge);
  strictEqual(
    cut,
    `${"y".repeat(MAX_MESSAGE_CHARS)}… (${5_000_000 - MAX_MESSAGE_CHARS} more characters)`,
  );
  strictEqual(snippet("abcdef", 3), "abc… (3 more characters)");
  // Whitespace that shrinks under the limit still says that something was cut.
  const spaced = "a" + " ".repeat(10_000) + "b";
  ok(snippet(spaced, 10).length < 60);
});

Deno.test("joinSnippets() joins at most ten parts and bounds the whole", () => {
  strictEqual(joinSnippets(["a", "b"]), "a; b");
  const many = Array.from({ length: 11 }, (_, i) => `m${i}`);
  strictEqual(
    joinSnippets(many),
    "m0; m1; m2; m3; m4; m5; m6; m7; m8; m9 (further messages left out)",
  );
  const long = joinSnippets(Array.from({ length: 10 }, () => "z".repeat(400)));
  ok(long.length < MAX_MESSAGE_CHARS + 40, `length ${long.length}`);
});
