import assert from "node:assert/strict";
import { join } from "node:path";
import { ensureDerived } from "./derived.ts";
import { removeUnfinishedBuilds, untilAborted } from "./unfinished.ts";

const RECIPE = { converter: "test", version: 1, inputs: [{ path: "in", sha256: "0".repeat(64) }] };

Deno.test("untilAborted: the work's result, or the signal's reason at once; an abandoned failure is swallowed", async () => {
  assert.equal(await untilAborted(Promise.resolve(3)), 3);
  const controller = new AbortController();
  assert.equal(await untilAborted(Promise.resolve(4), controller.signal), 4);
  await assert.rejects(untilAborted(Promise.reject(new Error("own")), controller.signal), /own/);

  let fail!: (e: Error) => void;
  const stuck = new Promise<number>((_, reject) => fail = reject);
  const waiting = untilAborted(stuck, controller.signal);
  controller.abort(new Error("stopped by SIGTERM"));
  await assert.rejects(waiting, /stopped by SIGTERM/);
  // The work fails later: nobody observes it, and it is not an unhandled rejection.
  fail(new Error("late"));
  await new Promise((r) => setTimeout(r, 0));
  // Already aborted: rejected without waiting.
  await assert.rejects(untilAborted(new Promise(() => {}), controller.signal), /SIGTERM/);
});

Deno.test("ensureDerived: an abort abandons the build, its scratch folder goes, and what it writes later is removed before exit", async () => {
  const parent = await Deno.makeTempDir({ prefix: "sd15-unfinished-" });
  try {
    const dir = join(parent, "set");
    const controller = new AbortController();
    let started!: (scratch: string) => void;
    const building = new Promise<string>((r) => started = r);
    let release!: () => void;
    const gate = new Promise<void>((r) => release = r);
    let wroteLate = false;
    const result = ensureDerived(dir, RECIPE, async (into) => {
      await Deno.writeTextFile(join(into, "a.bin"), "half");
      started(into);
      await gate;
      // An abandoned build that goes on (as a merge recreating a folder would).
      await Deno.mkdir(into, { recursive: true });
      await Deno.writeTextFile(join(into, "a.bin"), "late");
      wroteLate = true;
      return { files: [{ name: "a.bin" }] };
    }, { signal: controller.signal });
    const scratch = await building;
    assert.match(scratch, /set\.building-\d+-/);
    controller.abort(new Error("stopped by SIGTERM while starting"));
    await assert.rejects(result, /stopped by SIGTERM while starting/);
    await assert.rejects(Deno.stat(scratch), Deno.errors.NotFound);
    release();
    while (!wroteLate) await new Promise((r) => setTimeout(r, 5));
    assert.ok((await Deno.stat(scratch)).isDirectory, "the abandoned build wrote it again");
    assert.deepEqual(removeUnfinishedBuilds(), [scratch]);
    await assert.rejects(Deno.stat(scratch), Deno.errors.NotFound);
    await assert.rejects(Deno.stat(dir), Deno.errors.NotFound, "nothing looks complete");
    assert.deepEqual(removeUnfinishedBuilds(), [], "nothing tracked any more");

    // A build that finishes is kept, and no longer tracked.
    const done = await ensureDerived(dir, RECIPE, async (into) => {
      await Deno.writeTextFile(join(into, "a.bin"), "whole");
      return { files: [{ name: "a.bin" }] };
    }, { signal: new AbortController().signal });
    assert.ok(done.built);
    assert.deepEqual(removeUnfinishedBuilds(), []);
    assert.equal(await Deno.readTextFile(join(dir, "a.bin")), "whole");
  } finally {
    await Deno.remove(parent, { recursive: true });
  }
});
