/**
 * Image-to-image as diffusers 0.25 runs it: the denoising schedule cut by
 * `strength`, and the starting latents as the input image's latents noised
 * to the first kept timestep. Where each step comes from (huggingface/diffusers
 * v0.25.0):
 *
 * | step | source (file: function) |
 * | --- | --- |
 * | full schedule, then the cut: `init_timestep = min(int(steps·strength), steps)`, `t_start = max(steps − init_timestep, 0)`, `timesteps[t_start·order:]` | `pipelines/stable_diffusion/pipeline_stable_diffusion_img2img.py`: `retrieve_timesteps`, `StableDiffusionImg2ImgPipeline.get_timesteps` |
 * | `order` is 1 for every scheduler offered (PNDM, DDIM, Euler, Euler a, DPM-Solver++ 2M, LCM) | `schedulers/scheduling_*.py`: the class attribute `order = 1` |
 * | noise level of the start: `latent_timestep = timesteps[:1]` | `StableDiffusionImg2ImgPipeline.__call__` step 5 |
 * | image latents: `scaling_factor · retrieve_latents(vae.encode(image), generator)`, i.e. `latent_dist.sample(generator)`, **the generator's first draw** | `pipeline_stable_diffusion_img2img.py`: `retrieve_latents`, `prepare_latents`; `models/autoencoders/vae.py`: `DiagonalGaussianDistribution.sample` |
 * | noise: `randn_tensor(shape, generator)`, **the second draw** | `prepare_latents` |
 * | start: `scheduler.add_noise(init_latents, noise, latent_timestep)` (no `init_noise_sigma` scaling, at any strength) | `prepare_latents` |
 * | denoising loop (CFG batch, `scale_model_input`, guidance, `step` with the same generator), then decode `latents / scaling_factor` | `StableDiffusionImg2ImgPipeline.__call__` step 8 |
 *
 * Each scheduler's `add_noise` (`mod/schedulers`): PNDM, DDIM and LCM
 * `sqrt(ᾱ_t)·x0 + sqrt(1 − ᾱ_t)·noise` (`scheduling_pndm.py`,
 * `scheduling_ddim.py`, `scheduling_lcm.py`: `add_noise`); Euler and Euler a
 * `x0 + σ_t·noise` with σ at the timestep's index (`scheduling_euler_discrete.py`,
 * `scheduling_euler_ancestral_discrete.py`: `add_noise`); DPM-Solver
 * `α_t·x0 + σ_t·noise` from the sigma at that index (`scheduling_dpmsolver_multistep.py`:
 * `add_noise`, `_sigma_to_alpha_sigma_t`). The sigma-indexed schedulers find
 * their first step from the first kept timestep (`_init_step_index`), so a cut
 * schedule continues where the full one would be. PNDM's PLMS list has
 * `steps + 1` entries (its second timestep twice), so the cut keeps
 * `init_timestep + 1` UNet calls, and its warm-up (the counter-0 and
 * counter-1 steps) runs on the first two kept timesteps whatever they are,
 * exactly as `PNDMScheduler.step_plms` does when the pipeline hands it the
 * cut list. Diffusers after 0.25 adds
 * `scheduler.set_begin_index(t_start · order)`; it selects the same index as
 * the timestep search for these schedules (no repeated sigma timestep).
 *
 * The fast preset (the LCM LoRA on the SD 1.5 UNet, `LCMScheduler`) is
 * diffusers' LCM-LoRA image-to-image (`docs/source/en/using-diffusers/inference_with_lcm_lora.md`,
 * "Image-to-image": `AutoPipelineForImage2Image`, i.e. the same
 * `StableDiffusionImg2ImgPipeline`, with `LCMScheduler`): the LCM grid of
 * `steps` timesteps, cut as above. An LCM-distilled UNet (one with
 * `timestep_cond`) is `LatentConsistencyModelImg2ImgPipeline` instead
 * (`pipelines/latent_consistency_models/pipeline_latent_consistency_img2img.py`):
 * `scheduler.set_timesteps(steps, strength=strength)` builds the grid from
 * `int(original_inference_steps · strength)` training steps and all `steps`
 * are run; `prepare_latents` is the same.
 *
 * The turbo preset (the Hyper-SD LoRA, `TCDScheduler`) cannot be cut that
 * way: at its one step `int(1 · strength)` is 0 for every strength below 1,
 * and `StableDiffusionImg2ImgPipeline` then has nothing to run. TCD's
 * `set_timesteps(steps, strength=strength)` (diffusers v0.27.2
 * `scheduling_tcd.py`, documented there "for img2img, inpaint") starts the
 * grid at `int(original_inference_steps · strength)` instead, as LCM's does
 * for the latent consistency pipeline: all `steps` run, from a timestep
 * that keeps as much of the image as `strength` says (strength 0.3: one
 * step from t = 299). `prepare_latents` is the same.
 *
 * `image_to_image_reference_test.ts` replays diffusers 0.25.0's own
 * `get_timesteps`, `prepare_latents`, `retrieve_timesteps` and schedulers
 * (`testdata/make_img2img_reference.py`) through the engine; docs/image-to-image.md.
 *
 * @module
 */

import type { LcmScheduler, Scheduler, TcdScheduler } from "../schedulers/mod.ts";

/**
 * `scheduler.order` of every scheduler offered: each diffusers class sets
 * `order = 1` (multistep solvers keep their history between calls instead).
 */
export const SCHEDULER_ORDER = 1;

/** Which diffusers pipeline's image-to-image semantics apply. */
export type ImageToImagePipeline =
  /** `StableDiffusionImg2ImgPipeline` (every scheduler, the LCM LoRA included). */
  | "stable_diffusion"
  /** `LatentConsistencyModelImg2ImgPipeline` (an LCM-distilled UNet with the lcm scheduler). */
  | "latent_consistency"
  /** The tcd scheduler's own `set_timesteps(steps, strength)`, every step run (module docs). */
  | "tcd";

/** The schedule of one image-to-image run. */
export interface ImageToImageSchedule {
  /** The timesteps the UNet is run at, in order; `timesteps[0]` is the noise level of the start. */
  timesteps: number[];
  /** `t_start · order`: where the kept part begins in the scheduler's full list. */
  start: number;
  /** `init_timestep`: how many of the `steps` denoising steps are re-run. */
  initTimestep: number;
}

/**
 * `StableDiffusionImg2ImgPipeline.get_timesteps` (diffusers 0.25): the tail of
 * `timesteps` (the scheduler's full list for `steps` steps) that `strength`
 * keeps.
 */
export function cutTimesteps(
  timesteps: readonly number[],
  steps: number,
  strength: number,
): ImageToImageSchedule {
  checkStrength(strength);
  const initTimestep = Math.min(Math.floor(steps * strength), steps);
  const tStart = Math.max(steps - initTimestep, 0);
  const start = tStart * SCHEDULER_ORDER;
  return { timesteps: timesteps.slice(start), start, initTimestep };
}

/**
 * Sets `scheduler` up for an image-to-image run of `steps` steps at
 * `strength` and returns the timesteps to run, as `pipeline` does it (see
 * the module documentation).
 *
 * When `int(steps · strength)` is 0 (diffusers then has nothing to run and
 * fails), the last step is run alone.
 *
 * @throws RangeError when strength is outside (0, 1], or, for the LCM and
 *   TCD pipelines, when `int(original_inference_steps · strength)` is below `steps`
 */
export function imageToImageSchedule(
  scheduler: Scheduler,
  steps: number,
  strength: number,
  pipeline: ImageToImagePipeline,
): ImageToImageSchedule {
  checkStrength(strength);
  if (pipeline === "latent_consistency") {
    if (scheduler.name !== "lcm") {
      throw new RangeError(
        `the latent consistency pipeline needs the lcm scheduler, got ${scheduler.name}`,
      );
    }
    (scheduler as LcmScheduler).setTimesteps(steps, strength);
    return { timesteps: scheduler.timesteps, start: 0, initTimestep: steps };
  }
  if (pipeline === "tcd") {
    if (scheduler.name !== "tcd") {
      throw new RangeError(
        `the tcd image-to-image schedule needs the tcd scheduler, got ${scheduler.name}`,
      );
    }
    (scheduler as TcdScheduler).setTimesteps(steps, strength);
    return { timesteps: scheduler.timesteps, start: 0, initTimestep: steps };
  }
  scheduler.setTimesteps(steps);
  const all = scheduler.timesteps;
  const schedule = cutTimesteps(all, steps, strength);
  if (schedule.initTimestep > 0) return schedule;
  // int(steps · strength) = 0: diffusers has no timestep to noise to and fails; the last
  // step alone is the least change there is.
  const start = (steps - 1) * SCHEDULER_ORDER;
  return { timesteps: all.slice(start), start, initTimestep: 1 };
}

function checkStrength(strength: number): void {
  if (!(strength > 0 && strength <= 1)) {
    throw new RangeError(`strength must be in (0, 1], got ${strength}`);
  }
}
