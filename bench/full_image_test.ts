import { deepStrictEqual, strictEqual } from "node:assert";
import {
  imageScenarios,
  keptCalls,
  TRANSFORM_SCENARIO,
  UPSCALE_SCENARIO,
  upscaleEstimates,
} from "./full_image.ts";
import type { RunReport } from "./full_run.ts";
import { join } from "node:path";
import { copyDir } from "../tests/helpers/copy_dir.ts";
import { ROOT } from "../tests/helpers/paths.ts";

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

Deno.test("the image scenarios' runner makes a transform and an upscale on the tiny models", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sd15-bench-image-test-" });
  try {
    // The runner reads `<root>/models.lock`, as the full-size sets lay it out.
    const root = join(dir, "models");
    await copyDir(join(ROOT, "tests/fixtures/tiny/models"), root);
    await Deno.copyFile(join(ROOT, "tests/fixtures/tiny/models.lock"), join(root, "models.lock"));
    for (const scenario of imageScenarios()) {
      const out = await new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-P=test",
          "--cached-only",
          join(ROOT, "bench/full_image_run.ts"),
          "--root",
          root,
          ...scenario.args,
        ],
        stdout: "piped",
        stderr: "piped",
      }).output();
      const stderr = new TextDecoder().decode(out.stderr);
      strictEqual(out.code, 0, `${scenario.name}: ${stderr.slice(-2000)}`);
      const report = JSON.parse(new TextDecoder().decode(out.stdout).trim().split("\n").at(-1)!);
      const upscale = scenario.name === UPSCALE_SCENARIO;
      strictEqual(report.tiles, upscale ? 9 : 1, scenario.name);
      strictEqual(report.generations.length >= 1, true, scenario.name);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
