/**
 * `scheduler/scheduler_config.json` of SD 1.5 (runwayml/stable-diffusion-v1-5,
 * as duplicated in Charles-Elena/stable-diffusion-v1-5 and TensorStack's ONNX
 * repo): PNDM, scaled_linear betas 0.00085..0.012, steps_offset 1,
 * skip_prk_steps. Written into a converted set that brings no scheduler config
 * of its own (a single-file checkpoint has none: SD 1.x checkpoints share this one).
 *
 * @module
 */

/** The SD 1.5 scheduler config as an object. */
export const SD15_SCHEDULER_CONFIG = {
  _class_name: "PNDMScheduler",
  beta_end: 0.012,
  beta_schedule: "scaled_linear",
  beta_start: 0.00085,
  num_train_timesteps: 1000,
  set_alpha_to_one: false,
  skip_prk_steps: true,
  steps_offset: 1,
  trained_betas: null,
  clip_sample: false,
} as const;

/** The config file text (pretty-printed JSON, trailing newline). */
export const SD15_SCHEDULER_CONFIG_JSON: string = JSON.stringify(SD15_SCHEDULER_CONFIG, null, 2) +
  "\n";
