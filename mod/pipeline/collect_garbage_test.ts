import { ok } from "node:assert";
import { collectGarbage } from "./collect_garbage.ts";

Deno.test("collectGarbage: a dropped 256 MB buffer leaves the resident set at once", () => {
  const rss = () => Deno.memoryUsage().rss;
  let big: Uint8Array | undefined = new Uint8Array(256 * 2 ** 20).fill(1);
  const held = rss();
  ok(big[big.length - 1] === 1);
  big = undefined;
  ok(collectGarbage(), "V8 offers a collection");
  const after = rss();
  ok(held - after > 200 * 2 ** 20, `RSS went from ${held} to ${after}`);
});
