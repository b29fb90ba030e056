/**
 * Ports of the diffusers schedulers the SD 1.5 pipeline offers (PNDM/PLMS,
 * DDIM, Euler, Euler ancestral, DPM++ 2M, LCM, TCD), their shared noise schedule
 * and timestep spacing, and a factory from `scheduler_config.json`.
 *
 * @module
 */

export { createScheduler } from "./factory.ts";
export type { SchedulerOverrides } from "./factory.ts";
export { SCHEDULER_NAMES } from "./scheduler.ts";
export type { Scheduler, SchedulerName, StepResult } from "./scheduler.ts";
export { parseSchedulerConfig } from "./scheduler_config.ts";
export type {
  BetaSchedule,
  FinalSigmasType,
  PredictionType,
  SchedulerConfig,
  TimestepSpacing,
} from "./scheduler_config.ts";
export { alphasCumprod, makeBetas, sigmasFromAlphasCumprod, torchLinspaceF32 } from "./betas.ts";
export { PndmScheduler } from "./pndm.ts";
export { DdimScheduler } from "./ddim.ts";
export { EulerScheduler } from "./euler.ts";
export { EulerAncestralScheduler } from "./euler_ancestral.ts";
export { DpmSolverMultistepScheduler } from "./dpmpp_2m.ts";
export { LcmScheduler } from "./lcm.ts";
export { TcdScheduler } from "./tcd.ts";
export type { TcdOptions } from "./tcd.ts";
export { SD15_SCHEDULER_CONFIG, SD15_SCHEDULER_CONFIG_JSON } from "./sd15_config.ts";
