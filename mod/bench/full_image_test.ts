import { deepStrictEqual, strictEqual } from "node:assert";
import {
  imageScenarios,
  keptCalls,
  TRANSFORM_SCENARIO,
  UPSCALE_SCENARIO,
  upscaleEstimates,
} from "./full_image.ts";
import type { RunReport } from "./full_run.ts";

function report(runs: Record<string, number[]>): RunReport {
  return {
    options: {},
    loadMs: 0,
    rssAfterLoad: 0,
    peakRss: 0,
    rssAfterRuns: 0,
    generations: [{ totalMs: 1, sessionMs: 1 }],
    runs,
    stages: {},
  };
}

Deno.test("keptCalls: the UNet calls get_timesteps keeps per tile", () => {
  strictEqual(keptCalls(25, 0.3, true), 8, "int(7.5) = 7 steps, PLMS one call more");
  strictEqual(keptCalls(25, 0.5, false), 12);
  strictEqual(keptCalls(4, 0.3, false), 1);
  strictEqual(keptCalls(4, 0.2, false), 1, "at least one step");
  strictEqual(keptCalls(4, 1, false), 4);
});

Deno.test("upscaleEstimates: 9 × (encode + calls × UNet + decode) + text, per preset", () => {
  const results = {
    default: report({ unet: [14, 15, 13], vae_decoder: [22] }),
    fast: report({ unet: [6], vae_decoder: [1] }),
    [UPSCALE_SCENARIO]: report({ vae_encoder: [10, 10], text_encoder: [0.5] }),
  };
  const e = upscaleEstimates(results, "default", "fast")!;
  deepStrictEqual(e.map((x) => [x.unetCallsPerTile, x.perTileMs, x.totalMs]), [
    [8, 10 + 8 * 14 + 22, 0.5 + 9 * (10 + 8 * 14 + 22)],
    [1, 17, 0.5 + 9 * 17],
    [1, 10 + 6 + 22, 0.5 + 9 * 38],
  ]);
  strictEqual(upscaleEstimates({ default: results.default }, "default", "fast"), null);
  deepStrictEqual(imageScenarios().map((s) => s.name), [TRANSFORM_SCENARIO, UPSCALE_SCENARIO]);
  for (const s of imageScenarios()) strictEqual(s.name.includes(","), false, "--only can name it");
});
