/**
 * The `models-add` scenario of the full-size benchmark (`deno task bench
 * --full --only models-add`): `deno task models add` of a full-size SD 1.5
 * single-file checkpoint in fp16 (2.1 GB, the original CompVis layout, random
 * weights written tensor by tensor by `mod/checkpoint`'s test tooling at SD
 * 1.5's exact shapes), as a user runs it: a fresh models root, the CPU
 * provider's default precision (fp32), `--write-config`. It measures the
 * wall time and the peak RSS of the `models add` process (sampled from
 * outside, as every scenario), then a second `models add` of the same file,
 * which must find its derived set and convert nothing. Targets: at most 120 s
 * and 3 GB for the first.
 *
 * @module
 */

import { join, resolve } from "node:path";
import { testSd15, writeOriginalSafetensors } from "../mod/checkpoint/testing.ts";
import { benchCacheDir } from "./full_models.ts";
import { runSampled } from "./proc_sampler.ts";

/** One `models add` run. */
export interface ModelsAddRun {
  /** Wall time, ms. */
  ms: number;
  /** Peak RSS of the process, bytes. */
  peakRss: number;
  /** Exit status. */
  code: number;
  /** Its last log lines. */
  tail: string[];
}

/** What the scenario measured. */
export interface ModelsAddReport {
  /** The checkpoint: path and bytes, and how long writing it took (0: reused). */
  checkpoint: { path: string; bytes: number; writeMs: number };
  /** The first add (converts). */
  first: ModelsAddRun;
  /** The second add (finds the set in place). */
  second: ModelsAddRun;
  /** Whether the second add converted nothing. */
  secondConvertedNothing: boolean;
  /** Bytes of the converted set. */
  setBytes: number;
}

const REPO = resolve(new URL("../", import.meta.url).pathname);

async function modelsAdd(dir: string, file: string): Promise<ModelsAddRun> {
  const run = await runSampled(Deno.execPath(), [
    "run",
    "--config",
    join(REPO, "deno.json"),
    "-P=models",
    "--quiet",
    join(REPO, "mod/models/cli.ts"),
    "add",
    file,
    "--write-config",
  ], { cwd: dir, env: { NO_COLOR: "1" } });
  return {
    ms: run.ms,
    peakRss: run.peakRss,
    code: run.code,
    tail: run.lines.slice(-6).map((l) => l.text),
  };
}

/** Runs the scenario in `<bench cache>/models-add` (the checkpoint is kept for later runs). */
export async function runModelsAddBench(): Promise<ModelsAddReport> {
  const dir = join(benchCacheDir(), "models-add");
  const models = join(dir, "models");
  const file = join(models, "checkpoints", "sd15-random-fp16.safetensors");
  await Deno.mkdir(join(models, "checkpoints"), { recursive: true });
  let writeMs = 0;
  if (!(await Deno.stat(file).then((s) => s.size > 2e9, () => false))) {
    const t0 = performance.now();
    const model = testSd15({
      unetWidth: 320,
      context: 768,
      vaeWidth: 128,
      textLayers: 12,
      vocab: 49408,
      positions: 77,
      lazy: true,
    });
    await writeOriginalSafetensors(`${file}.partial`, model, { dtype: "F16" });
    await Deno.rename(`${file}.partial`, file);
    writeMs = Math.round(performance.now() - t0);
  }
  // A fresh root but for the checkpoint: no converted set, lock overlay, config or hash cache.
  for (const p of ["models/converted", "models/.verified.json", "models.local.lock"]) {
    await Deno.remove(join(dir, p), { recursive: true }).catch(() => {});
  }
  await Deno.remove(join(dir, "config.local.toml")).catch(() => {});
  await Deno.writeTextFile(join(dir, "models.lock"), "");
  await Deno.writeTextFile(join(dir, "config.toml"), '[models]\nroot = "models"\n');
  const first = await modelsAdd(dir, file);
  const second = await modelsAdd(dir, file);
  let setBytes = 0;
  const walk = async (d: string) => {
    for await (const e of Deno.readDir(d)) {
      if (e.isDirectory) await walk(join(d, e.name));
      else setBytes += (await Deno.stat(join(d, e.name))).size;
    }
  };
  await walk(join(models, "converted")).catch(() => {});
  return {
    checkpoint: { path: file, bytes: (await Deno.stat(file)).size, writeMs },
    first,
    second,
    secondConvertedNothing: second.code === 0 &&
      second.tail.some((l) => /already converted, locked and configured/.test(l)),
    setBytes,
  };
}

if (import.meta.main) {
  const report = await runModelsAddBench();
  console.log(JSON.stringify(report, null, 2));
  const gb = (b: number) => (b / 1e9).toFixed(2);
  console.error(
    `models add (fp16 checkpoint ${gb(report.checkpoint.bytes)} GB → fp32 set ` +
      `${gb(report.setBytes)} GB): ${(report.first.ms / 1000).toFixed(1)} s, peak RSS ` +
      `${gb(report.first.peakRss)} GB (targets 120 s, 3 GB); again: ` +
      `${
        (report.second.ms / 1000).toFixed(1)
      } s, converted nothing: ${report.secondConvertedNothing}`,
  );
}
