import { deepStrictEqual, strictEqual, throws } from "node:assert";
import { compareImages, presetRun } from "./full_diffusers.ts";
import { parseRun } from "./full_diffusers_run.ts";

Deno.test("diffusers check: the preset runs by name, and the runner's run syntax", () => {
  deepStrictEqual(presetRun("turbo-2", 0.3), {
    name: "turbo-2",
    scheduler: "tcd",
    steps: 2,
    eta: 0.3,
    guidanceScale: 0,
    lora: "turbo",
  });
  deepStrictEqual(presetRun("fast-4", 1), {
    name: "fast-4",
    scheduler: "lcm",
    steps: 4,
    eta: 0,
    guidanceScale: 1,
    lora: "fast",
  });
  throws(() => presetRun("quality-25", 0), /expected turbo-N or fast-N/);
  deepStrictEqual(parseRun("t:tcd:2:0.3:0"), {
    name: "t",
    scheduler: "tcd",
    steps: 2,
    eta: 0.3,
    guidanceScale: 0,
  });
  throws(() => parseRun("t:tcd:two:0:0"), /NAME:SCHEDULER:STEPS:ETA:GUIDANCE/);
});

Deno.test("diffusers check: image differences in grey levels and PSNR", () => {
  const a = Uint8Array.from([0, 10, 200, 255]);
  deepStrictEqual(compareImages(a, a), { maxDiff: 0, meanDiff: 0, psnrDb: Infinity, differing: 0 });
  const b = Uint8Array.from([1, 10, 198, 255]);
  const c = compareImages(a, b);
  strictEqual(c.maxDiff, 2);
  strictEqual(c.meanDiff, 0.75);
  strictEqual(c.differing, 0.5);
  // MSE (1 + 4) / 4 = 1.25: 10·log10(255² / 1.25) dB.
  strictEqual(c.psnrDb, 10 * Math.log10(65025 / 1.25));
  throws(() => compareImages(a, b.subarray(1)), /differ in size/);
});
