import { deepStrictEqual, ok, strictEqual, throws } from "node:assert";
import { TorchGenerator } from "../random/mod.ts";
import { createScheduler } from "./factory.ts";
import { SCHEDULER_NAMES } from "./scheduler.ts";
import type { SchedulerName } from "./scheduler.ts";
import { SD15_CONFIG } from "./testdata/reference.ts";

Deno.test("factory: every name builds its class with the diffusers default spacing", () => {
  const firstTwo: Record<SchedulerName, number[]> = {
    pndm: [951, 901], // leading + offset 1 (then the PLMS repeat of 901)
    ddim: [951, 901], // leading + offset 1
    euler: [999, Math.fround((999 * 18) / 19)], // linspace, float32
    euler_a: [999, Math.fround((999 * 18) / 19)],
    dpmpp_2m: [999, 949], // linspace over N+1 points
    lcm: [999, 959], // grid 999, 979, … at floor(2.5 i): spacing-independent
    tcd: [999, 959], // the same grid as lcm
  };
  for (const name of SCHEDULER_NAMES) {
    const s = createScheduler(name, SD15_CONFIG);
    strictEqual(s.name, name);
    s.setTimesteps(20);
    deepStrictEqual(s.timesteps.slice(0, 2), firstTwo[name], name);
  }
});

Deno.test("factory: config timestep_spacing is used, an override wins", () => {
  const trailing = { ...SD15_CONFIG, timestep_spacing: "trailing" };
  const fromConfig = createScheduler("ddim", trailing);
  fromConfig.setTimesteps(20);
  deepStrictEqual(fromConfig.timesteps.slice(0, 2), [999, 949]);
  const overridden = createScheduler("ddim", trailing, { timestepSpacing: "linspace" });
  overridden.setTimesteps(4);
  deepStrictEqual(overridden.timesteps, [999, 666, 333, 0]);
  const euler = createScheduler("euler", SD15_CONFIG, { timestepSpacing: "leading" });
  euler.setTimesteps(20);
  deepStrictEqual(euler.timesteps.slice(0, 2), [951, 901]);
  ok(Math.abs(euler.initNoiseSigma - 11.0736) < 1e-3, `${euler.initNoiseSigma}`);
});

Deno.test("factory: karras and eta go only where implemented", () => {
  const k = createScheduler("dpmpp_2m", SD15_CONFIG, { karras: true });
  k.setTimesteps(20);
  strictEqual(k.timesteps[1], 962);
  createScheduler("euler", SD15_CONFIG, { karras: true });
  throws(
    () => createScheduler("pndm", SD15_CONFIG, { karras: true }),
    /pndm does not implement Karras/,
  );
  throws(
    () => createScheduler("euler_a", SD15_CONFIG, { eta: 0.5 }),
    /eta=0\.5 applies only to ddim and tcd, not to euler_a/,
  );
  createScheduler("euler_a", SD15_CONFIG, { eta: 0 });
  const ddim = createScheduler("ddim", SD15_CONFIG, { eta: 0.5 });
  ddim.setTimesteps(10);
  const x = new Float32Array(16).fill(0.5);
  throws(() => ddim.step(x, ddim.timesteps[0], x), /needs a TorchGenerator/);
  ok(ddim.step(x, ddim.timesteps[0], x, new TorchGenerator(0)).prevSample.every(Number.isFinite));
  throws(() => createScheduler("heun" as SchedulerName, SD15_CONFIG), /unknown scheduler "heun"/);
  throws(() => createScheduler("ddim", { thresholding: true }), /thresholding=true/);
  // DPM-only keys do not affect the other classes, as from_config ignores them.
  createScheduler("pndm", { ...SD15_CONFIG, solver_order: 3 });
  throws(() => createScheduler("dpmpp_2m", { ...SD15_CONFIG, solver_order: 3 }), /solver_order=2/);
});
