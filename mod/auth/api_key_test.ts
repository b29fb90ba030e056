import { deepStrictEqual, ok, strictEqual } from "node:assert";
import {
  BASE62_ALPHABET,
  generateApiKey,
  parseApiKey,
  PREFIX_LENGTH,
  presentedKey,
  randomBase62,
  SECRET_LENGTH,
} from "./api_key.ts";

Deno.test("parseApiKey splits at the last underscore, as the contract's greedy regex does", () => {
  deepStrictEqual(parseApiKey("guinness_abc_XYZ123"), {
    key: "guinness_abc_XYZ123",
    prefix: "abc",
    secret: "XYZ123",
  });
  // The prefix group [a-zA-Z0-9_-]+ may hold "_" and "-"; the secret group cannot hold "_".
  deepStrictEqual(parseApiKey("guinness_a_b-c_S3cret"), {
    key: "guinness_a_b-c_S3cret",
    prefix: "a_b-c",
    secret: "S3cret",
  });
});

Deno.test("parseApiKey rejects keys that do not match the contract's format", () => {
  for (
    const bad of [
      "",
      "guinness_",
      "guinness_abc",
      "guinness_abc_",
      "guinness__secret",
      "Guinness_abc_secret",
      "xguinness_abc_secret",
      "guinness_abc_sec-ret",
      "guinness_abc_secret ",
      "guinness_ab c_secret",
      "guinness_abc_sécret",
      "guinness_abc_secret\n",
      `guinness_abc_${"a".repeat(600)}`,
    ]
  ) {
    strictEqual(parseApiKey(bad), null, `should be malformed: ${JSON.stringify(bad)}`);
  }
});

Deno.test("generateApiKey makes base62 prefix and secret of the documented lengths that parse back", () => {
  const seen = new Set<string>();
  for (let i = 0; i < 50; i++) {
    const key = generateApiKey();
    strictEqual(key.prefix.length, PREFIX_LENGTH);
    strictEqual(key.secret.length, SECRET_LENGTH);
    ok(SECRET_LENGTH >= 32, "a secret has at least 32 characters");
    ok(/^[0-9A-Za-z]+$/.test(key.prefix) && /^[0-9A-Za-z]+$/.test(key.secret));
    deepStrictEqual(parseApiKey(key.key), key);
    seen.add(key.prefix);
  }
  strictEqual(seen.size, 50, "prefixes must not repeat");
});

Deno.test("randomBase62 is uniform: no modulo bias towards the first 8 characters", () => {
  // With plain `byte % 62`, characters 0–7 would come up with probability
  // 5/256 instead of 4/256, i.e. 25% more often than the rest.
  const counts = new Map<string, number>();
  const text = randomBase62(124_000);
  strictEqual(text.length, 124_000);
  for (const ch of text) counts.set(ch, (counts.get(ch) ?? 0) + 1);
  strictEqual(counts.size, 62);
  for (const ch of counts.keys()) ok(BASE62_ALPHABET.includes(ch));
  const expected = 124_000 / 62; // 2000; standard deviation ≈ sqrt(2000) ≈ 45
  const head = [...BASE62_ALPHABET.slice(0, 8)].reduce((s, ch) => s + counts.get(ch)!, 0) / 8;
  const tail = [...BASE62_ALPHABET.slice(8)].reduce((s, ch) => s + counts.get(ch)!, 0) / 54;
  ok(Math.abs(head / tail - 1) < 0.06, `head/tail ratio ${head / tail} shows bias`);
  for (const [ch, n] of counts) {
    ok(Math.abs(n - expected) < 300, `count of ${ch} is ${n}, expected about ${expected}`);
  }
});

Deno.test("presentedKey reads MCP-API-Key first, then Authorization: Bearer", () => {
  deepStrictEqual(presentedKey(new Headers({ "MCP-API-Key": "guinness_a_b" })), {
    kind: "key",
    value: "guinness_a_b",
    header: "mcp-api-key",
  });
  deepStrictEqual(presentedKey(new Headers({ Authorization: "Bearer guinness_a_b" })), {
    kind: "key",
    value: "guinness_a_b",
    header: "authorization",
  });
  deepStrictEqual(presentedKey(new Headers({ Authorization: "bearer   guinness_a_b" })), {
    kind: "key",
    value: "guinness_a_b",
    header: "authorization",
  });
  deepStrictEqual(
    presentedKey(
      new Headers({ "MCP-API-Key": "guinness_x_y", Authorization: "Bearer guinness_a_b" }),
    ),
    { kind: "key", value: "guinness_x_y", header: "mcp-api-key" },
  );
  deepStrictEqual(presentedKey(new Headers()), { kind: "missing" });
  deepStrictEqual(presentedKey(new Headers({ Authorization: "Basic dXNlcjpwdw==" })), {
    kind: "unsupported-scheme",
  });
  deepStrictEqual(presentedKey(new Headers({ Authorization: "Bearer a b" })), {
    kind: "unsupported-scheme",
  });
});
