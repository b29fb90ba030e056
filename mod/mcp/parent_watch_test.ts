import assert from "node:assert/strict";
import { watchParent } from "./parent_watch.ts";

Deno.test("watchParent reports a changed parent pid once, and nothing while it stays", async () => {
  let ppid = 4242;
  const seen: Array<[number, number]> = [];
  const watch = watchParent((was, now) => seen.push([was, now]), {
    intervalMs: 5,
    parentPid: () => ppid,
  });
  try {
    await new Promise((r) => setTimeout(r, 30));
    assert.deepEqual(seen, []);
    ppid = 1; // re-parented to init: the client died
    for (let i = 0; i < 100 && seen.length === 0; i++) await new Promise((r) => setTimeout(r, 5));
    ppid = 7;
    await new Promise((r) => setTimeout(r, 30));
    assert.deepEqual(seen, [[4242, 1]]);
  } finally {
    watch.stop();
  }
});

Deno.test("watchParent reads the real parent pid by default", () => {
  let called = false;
  const watch = watchParent(() => called = true);
  watch.stop();
  assert.equal(called, false);
  assert.ok(Deno.ppid > 0);
});
