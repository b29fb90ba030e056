import assert from "node:assert/strict";
import { contentSize, FinishedCache, type FinishedContent } from "./finished_cache.ts";

const content = (data: string, text = ""): FinishedContent => ({
  items: [{ type: "text", text }, { type: "image", data, mimeType: "image/png" }],
  previews: [],
});

Deno.test("finished cache: keyed by job and budget, bounded in characters, least recently read out first", () => {
  const cache = new FinishedCache(100);
  const a = content("A".repeat(40), "ab");
  assert.equal(contentSize(a), 42);
  cache.set("a", 5, a);
  assert.equal(cache.get("a", 5), a);
  assert.equal(cache.get("a", 6), undefined, "another budget is another read");
  cache.set("b", 5, content("B".repeat(40)));
  assert.equal(cache.bytes, 82);
  // Read "a" now: "b" is the least recently read.
  assert.ok(cache.get("a", 5));
  cache.set("c", 5, content("C".repeat(30)));
  assert.equal(cache.get("b", 5), undefined, "the least recently read went");
  assert.ok(cache.get("a", 5));
  assert.ok(cache.get("c", 5));
  assert.equal(cache.bytes, 72);
  assert.equal(cache.size, 2);
  // Content over the bound is not kept, and pushes nothing out.
  cache.set("d", 5, content("D".repeat(101)));
  assert.equal(cache.get("d", 5), undefined);
  assert.equal(cache.size, 2);
  // Kept again: replaced, counted once.
  cache.set("a", 5, content("E".repeat(10)));
  assert.equal(cache.bytes, 40);
  cache.set("a", 7, content("F".repeat(10)));
  cache.delete("a");
  assert.equal(cache.get("a", 5), undefined);
  assert.equal(cache.get("a", 7), undefined);
  assert.equal(cache.bytes, 30);
});
