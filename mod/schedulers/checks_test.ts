import { doesNotThrow, throws } from "node:assert";
import { requireStepLeft } from "./checks.ts";
import { DpmSolverMultistepScheduler } from "./dpmpp_2m.ts";
import { EulerScheduler } from "./euler.ts";
import { parseSchedulerConfig } from "./scheduler_config.ts";
import { SD15_CONFIG } from "./testdata/reference.ts";

Deno.test("checks: requireStepLeft names the scheduler and the step count", () => {
  doesNotThrow(() => requireStepLeft("euler", 2, 3));
  throws(
    () => requireStepLeft("euler", 3, 3),
    /^Error: euler\.step called after the last of 3 steps$/,
  );
});

Deno.test("checks: a step past the last one throws in the sigma-space schedulers", () => {
  const config = parseSchedulerConfig(SD15_CONFIG);
  for (const s of [new EulerScheduler(config), new DpmSolverMultistepScheduler(config)]) {
    s.setTimesteps(2);
    let x: Float32Array = new Float32Array([0.5, -0.5]);
    const eps = new Float32Array([0.1, 0.2]);
    for (const t of s.timesteps) x = s.step(eps, t, x).prevSample;
    throws(
      () => s.step(eps, s.timesteps[1], x),
      new RegExp(`${s.name}\\.step called after the last of 2 steps`),
    );
  }
});
