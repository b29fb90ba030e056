/**
 * Builds a scheduler by name from a diffusers `scheduler_config.json`, the
 * way `XScheduler.from_config(config)` would: config keys win over each
 * class's defaults, and explicit overrides win over the config.
 *
 * @module
 */

import { DdimScheduler } from "./ddim.ts";
import { DpmSolverMultistepScheduler } from "./dpmpp_2m.ts";
import { EulerScheduler } from "./euler.ts";
import { EulerAncestralScheduler } from "./euler_ancestral.ts";
import { LcmScheduler } from "./lcm.ts";
import { PndmScheduler } from "./pndm.ts";
import { TcdScheduler } from "./tcd.ts";
import { SCHEDULER_NAMES } from "./scheduler.ts";
import type { Scheduler, SchedulerName } from "./scheduler.ts";
import { parseSchedulerConfig } from "./scheduler_config.ts";
import type { TimestepSpacing } from "./scheduler_config.ts";

/** Per-request choices that override the model's scheduler config. */
export interface SchedulerOverrides {
  /** Replaces `timestep_spacing` (ignored by lcm and tcd, whose grids have no spacing option). */
  timestepSpacing?: TimestepSpacing;
  /** Karras sigmas; only euler and dpmpp_2m implement them. */
  karras?: boolean;
  /**
   * η (0..1) of ddim and tcd (TCD's γ; its own default 0.3 when absent);
   * other schedulers accept only 0.
   */
  eta?: number;
}

/**
 * Creates a fresh scheduler. Without a `timestepSpacing` override each class
 * uses the config's `timestep_spacing` or else its diffusers default
 * (pndm/ddim "leading"; lcm and tcd have no spacing, euler/euler_a/dpmpp_2m "linspace").
 *
 * @param config the parsed JSON of `scheduler/scheduler_config.json`.
 * @throws Error for an unknown name, an invalid or unsupported config value,
 *   or an override the chosen scheduler does not implement.
 */
export function createScheduler(
  name: SchedulerName,
  config: unknown,
  overrides: SchedulerOverrides = {},
): Scheduler {
  if (!SCHEDULER_NAMES.includes(name)) {
    throw new Error(
      `unknown scheduler ${JSON.stringify(name)}; expected one of ${SCHEDULER_NAMES.join(", ")}`,
    );
  }
  const parsed = parseSchedulerConfig(config);
  const { timestepSpacing, karras, eta } = overrides;
  if (karras === true && name !== "euler" && name !== "dpmpp_2m") {
    throw new Error(
      `scheduler ${name} does not implement Karras sigmas (only euler and dpmpp_2m do)`,
    );
  }
  if (eta !== undefined && eta !== 0 && name !== "ddim" && name !== "tcd") {
    throw new Error(`eta=${eta} applies only to ddim and tcd, not to ${name}`);
  }
  switch (name) {
    case "pndm":
      return new PndmScheduler(parsed, { timestepSpacing });
    case "ddim":
      return new DdimScheduler(parsed, { timestepSpacing, eta });
    case "euler":
      return new EulerScheduler(parsed, { timestepSpacing, karras });
    case "euler_a":
      return new EulerAncestralScheduler(parsed, { timestepSpacing });
    case "dpmpp_2m":
      return new DpmSolverMultistepScheduler(parsed, { timestepSpacing, karras });
    case "lcm":
      return new LcmScheduler(parsed);
    case "tcd":
      return new TcdScheduler(parsed, { eta });
  }
}
