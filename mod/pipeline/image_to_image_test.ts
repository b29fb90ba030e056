/**
 * The timestep cut of image-to-image per scheduler, against values computed
 * here from diffusers' own formulas (huggingface/diffusers v0.25.0), written
 * out independently of mod/schedulers.
 */

import { deepStrictEqual, strictEqual, throws } from "node:assert";
import { SCHEDULER_CONFIG } from "../../tests/fixtures/builder/mod.ts";
import { createScheduler, type LcmScheduler, type SchedulerName } from "../schedulers/mod.ts";
import { cutTimesteps, imageToImageSchedule } from "./image_to_image.ts";

const fround = Math.fround;

/**
 * `StableDiffusionImg2ImgPipeline.get_timesteps` (pipeline_stable_diffusion_img2img.py):
 * `init_timestep = min(int(N · strength), N)`, `t_start = max(N − init_timestep, 0)`,
 * `timesteps[t_start · order:]` with `order = 1`.
 */
function getTimesteps(timesteps: number[], n: number, strength: number): number[] {
  const init = Math.min(Math.trunc(n * strength), n);
  return timesteps.slice(Math.max(n - init, 0));
}

/**
 * Full schedules of SD 1.5's scheduler config (`steps_offset` 1; class default spacing:
 * leading for PNDM/DDIM, linspace for Euler/Euler a/DPM-Solver), from each
 * `set_timesteps` in schedulers/scheduling_*.py.
 */
const FULL: Record<Exclude<SchedulerName, "lcm" | "tcd">, (n: number) => number[]> = {
  // scheduling_pndm.py: _timesteps = arange(0, N) · (1000 // N) + steps_offset;
  // plms_timesteps = concat([_t[:-1], _t[-2:-1], _t[-1:]])[::-1]
  pndm: (n) => {
    const t = Array.from({ length: n }, (_, i) => i * Math.floor(1000 / n) + 1);
    return [...t.slice(0, -1), ...t.slice(-2, -1), ...t.slice(-1)].reverse();
  },
  // scheduling_ddim.py "leading": (arange(0, N) · (1000 // N)).round()[::-1] + steps_offset
  ddim: (n) => Array.from({ length: n }, (_, i) => (n - 1 - i) * Math.floor(1000 / n) + 1),
  // scheduling_euler_discrete.py "linspace": np.linspace(0, 999, N, dtype=float32)[::-1]
  euler: (n) => Array.from({ length: n }, (_, i) => fround(((n - 1 - i) * 999) / (n - 1))),
  euler_a: (n) => Array.from({ length: n }, (_, i) => fround(((n - 1 - i) * 999) / (n - 1))),
  // scheduling_dpmsolver_multistep.py "linspace": linspace(0, 999, N + 1).round()[::-1][:-1]
  dpmpp_2m: (n) => Array.from({ length: n }, (_, i) => Math.round(((n - i) * 999) / n)),
};

Deno.test("cut per scheduler, N = 25: the tail get_timesteps keeps", () => {
  for (const name of Object.keys(FULL) as Array<keyof typeof FULL>) {
    const scheduler = createScheduler(name, SCHEDULER_CONFIG);
    for (const strength of [0.3, 0.5, 0.75, 1]) {
      const { timesteps } = imageToImageSchedule(scheduler, 25, strength, "stable_diffusion");
      deepStrictEqual(
        timesteps,
        getTimesteps(FULL[name](25), 25, strength),
        `${name} at ${strength}`,
      );
    }
  }
  // Spelled out at strength 0.3: int(25 · 0.3) = 7, t_start = 18.
  const at = (name: SchedulerName) =>
    imageToImageSchedule(createScheduler(name, SCHEDULER_CONFIG), 25, 0.3, "stable_diffusion");
  // PLMS has 26 entries, so 8 UNet calls: 961 − 40·(k − 1) for k = 18..25.
  deepStrictEqual(at("pndm").timesteps, [281, 241, 201, 161, 121, 81, 41, 1]);
  deepStrictEqual(at("ddim").timesteps, [241, 201, 161, 121, 81, 41, 1]);
  deepStrictEqual(at("euler").timesteps, [249.75, 208.125, 166.5, 124.875, 83.25, 41.625, 0]);
  deepStrictEqual(at("dpmpp_2m").timesteps, [280, 240, 200, 160, 120, 80, 40]);
  strictEqual(at("pndm").start, 18);
  strictEqual(at("pndm").initTimestep, 7);
});

Deno.test("strength 1 keeps the whole text-to-image schedule of every scheduler", () => {
  for (const name of ["pndm", "ddim", "euler", "euler_a", "dpmpp_2m", "lcm"] as const) {
    for (const n of [1, 4, 20, 25]) {
      const reference = createScheduler(name, SCHEDULER_CONFIG);
      reference.setTimesteps(n);
      const schedule = imageToImageSchedule(
        createScheduler(name, SCHEDULER_CONFIG),
        n,
        1,
        "stable_diffusion",
      );
      deepStrictEqual(schedule.timesteps, reference.timesteps, `${name}, ${n} steps`);
      strictEqual(schedule.start, 0);
    }
  }
});

Deno.test("Karras sigmas (DPM++ 2M Karras): the cut of its own timesteps", () => {
  const full = createScheduler("dpmpp_2m", SCHEDULER_CONFIG, { karras: true });
  full.setTimesteps(20);
  const cut = imageToImageSchedule(
    createScheduler("dpmpp_2m", SCHEDULER_CONFIG, { karras: true }),
    20,
    0.5,
    "stable_diffusion",
  );
  deepStrictEqual(cut.timesteps, full.timesteps.slice(10));
});

Deno.test("the fast preset (LCM LoRA, StableDiffusionImg2ImgPipeline + LCMScheduler)", () => {
  // scheduling_lcm.py set_timesteps(4): origin = arange(1, 51) · 20 − 1, reversed, at
  // floor(linspace(0, 50, 4, endpoint=False)) = 0, 12, 25, 37 → 999, 759, 499, 259; then cut.
  const lcm = (strength: number) =>
    imageToImageSchedule(createScheduler("lcm", SCHEDULER_CONFIG), 4, strength, "stable_diffusion")
      .timesteps;
  deepStrictEqual(lcm(1), [999, 759, 499, 259]);
  deepStrictEqual(lcm(0.75), [759, 499, 259]);
  deepStrictEqual(lcm(0.5), [499, 259]);
  deepStrictEqual(lcm(0.3), [259]);
});

Deno.test("an LCM-distilled UNet (LatentConsistencyModelImg2ImgPipeline): strength in set_timesteps", () => {
  // set_timesteps(4, strength): origin = arange(1, int(50 · strength) + 1) · 20 − 1, reversed,
  // sampled at floor(linspace(0, len, 4, endpoint=False)); all 4 steps run.
  const at = (strength: number) =>
    imageToImageSchedule(
      createScheduler("lcm", SCHEDULER_CONFIG),
      4,
      strength,
      "latent_consistency",
    );
  // len 25: indices 0, 6, 12, 18 of [499, 479, …, 19]
  deepStrictEqual(at(0.5).timesteps, [499, 379, 259, 139]);
  // len 15: indices 0, 3, 7, 11 of [299, 279, …, 19]
  deepStrictEqual(at(0.3).timesteps, [299, 239, 159, 79]);
  deepStrictEqual(at(1).timesteps, [999, 759, 499, 259]);
  strictEqual(at(0.3).initTimestep, 4);
  // int(50 · 0.05) = 2 grid timesteps cannot give 4 steps (diffusers raises too).
  throws(() => at(0.05), /leaves 2 timesteps, fewer than numInferenceSteps \(4\)/);
  throws(
    () =>
      imageToImageSchedule(createScheduler("pndm", SCHEDULER_CONFIG), 4, 0.5, "latent_consistency"),
    /needs the lcm scheduler/,
  );
  const direct = createScheduler("lcm", SCHEDULER_CONFIG) as LcmScheduler;
  direct.setTimesteps(2, 0.2);
  deepStrictEqual(direct.timesteps, [199, 99]);
});

Deno.test("strength out of range is refused; a strength that keeps no step runs the last one", () => {
  const pndm = () => createScheduler("pndm", SCHEDULER_CONFIG);
  throws(
    () => imageToImageSchedule(pndm(), 25, 0, "stable_diffusion"),
    /strength must be in \(0, 1\]/,
  );
  throws(() => imageToImageSchedule(pndm(), 25, 1.5, "stable_diffusion"), /got 1.5/);
  throws(() => cutTimesteps([1, 2], 2, -1), /got -1/);
  // int(3 · 0.3) = 0: diffusers would have no timestep; the last step (PLMS: its last 2 calls).
  const last = imageToImageSchedule(pndm(), 3, 0.3, "stable_diffusion");
  deepStrictEqual(last.timesteps, FULL.pndm(3).slice(2));
  strictEqual(last.initTimestep, 1);
  deepStrictEqual(cutTimesteps(FULL.ddim(3), 3, 0.3).timesteps, [], "the diffusers formula itself");
});

Deno.test("the turbo preset (Hyper-SD LoRA + TCDScheduler): strength in TCD's own set_timesteps", () => {
  // scheduling_tcd.py set_timesteps(N, strength): origin = arange(1, int(50 · strength) + 1) · 20 − 1,
  // reversed, at floor(linspace(0, len, N, endpoint=False)); every step runs.
  const at = (steps: number, strength: number) =>
    imageToImageSchedule(createScheduler("tcd", SCHEDULER_CONFIG), steps, strength, "tcd");
  // One step: the first grid timestep at or under the strength's share of the schedule.
  deepStrictEqual(at(1, 0.3).timesteps, [299]);
  deepStrictEqual(at(1, 0.5).timesteps, [499]);
  deepStrictEqual(at(1, 0.75).timesteps, [739]);
  deepStrictEqual(at(1, 1).timesteps, [999]);
  // Two steps at 0.5: len 25, indices 0 and 12 of [499, 479, …, 19].
  deepStrictEqual(at(2, 0.5).timesteps, [499, 259]);
  strictEqual(at(2, 0.5).initTimestep, 2);
  strictEqual(at(2, 0.5).start, 0);
  // Under StableDiffusionImg2ImgPipeline's cut one step would keep nothing at 0.3.
  strictEqual(cutTimesteps([999], 1, 0.3).timesteps.length, 0);
  throws(() => at(8, 0.1), /original_inference_steps × strength = 50 × 0.1 is smaller/);
  throws(
    () => imageToImageSchedule(createScheduler("lcm", SCHEDULER_CONFIG), 1, 0.5, "tcd"),
    /needs the tcd scheduler/,
  );
});
