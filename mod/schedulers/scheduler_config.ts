/**
 * Parses a diffusers `scheduler/scheduler_config.json` object into typed
 * fields. A key that is absent (or `null`) stays `undefined`, so each
 * scheduler class applies its own diffusers default, as
 * `XScheduler.from_config(config)` does. Keys whose values would select
 * behaviour this port does not implement are rejected with an error naming
 * the key, rather than silently ignored.
 *
 * @module
 */

/** Beta schedules implemented (diffusers `beta_schedule`). */
export type BetaSchedule = "linear" | "scaled_linear";
/** What the UNet predicts (diffusers `prediction_type`). */
export type PredictionType = "epsilon" | "v_prediction";
/** How inference timesteps are spread over the training range (diffusers `timestep_spacing`). */
export type TimestepSpacing = "leading" | "trailing" | "linspace";
/** What the DPM-Solver's final sigma is (diffusers `final_sigmas_type`). */
export type FinalSigmasType = "zero" | "sigma_min";

/** The fields of a diffusers scheduler config that these schedulers read. */
export interface SchedulerConfig {
  /** `num_train_timesteps` */
  numTrainTimesteps?: number;
  /** `beta_start` */
  betaStart?: number;
  /** `beta_end` */
  betaEnd?: number;
  /** `beta_schedule` */
  betaSchedule?: BetaSchedule;
  /** `steps_offset` (used by "leading" spacing) */
  stepsOffset?: number;
  /** `set_alpha_to_one` (PNDM, DDIM, LCM) */
  setAlphaToOne?: boolean;
  /** `clip_sample` (DDIM, LCM) */
  clipSample?: boolean;
  /** `clip_sample_range` (DDIM, LCM) */
  clipSampleRange?: number;
  /** `prediction_type` */
  predictionType?: PredictionType;
  /** `timestep_spacing` */
  timestepSpacing?: TimestepSpacing;
  /** `skip_prk_steps` (PNDM) */
  skipPrkSteps?: boolean;
  /** `use_karras_sigmas` (Euler, DPM-Solver) */
  useKarrasSigmas?: boolean;
  /** `original_inference_steps` (LCM) */
  originalInferenceSteps?: number;
  /** `timestep_scaling` (LCM) */
  timestepScaling?: number;
  /** `algorithm_type` (DPM-Solver; only "dpmsolver++" is implemented) */
  algorithmType?: string;
  /** `solver_order` (DPM-Solver; only 2 is implemented) */
  solverOrder?: number;
  /** `solver_type` (DPM-Solver; only "midpoint" is implemented) */
  solverType?: string;
  /** `lower_order_final` (DPM-Solver) */
  lowerOrderFinal?: boolean;
  /** `euler_at_final` (DPM-Solver) */
  eulerAtFinal?: boolean;
  /** `final_sigmas_type` (DPM-Solver) */
  finalSigmasType?: FinalSigmasType;
}

/** Keys that must be absent, null or at their diffusers default, with the reason. */
const UNSUPPORTED: ReadonlyArray<[key: string, allowed: unknown, what: string]> = [
  ["trained_betas", null, "explicit trained_betas are not supported"],
  ["thresholding", false, "dynamic thresholding is not implemented"],
  ["rescale_betas_zero_snr", false, "zero-SNR beta rescaling is not implemented"],
  ["timestep_type", "discrete", "only discrete timesteps are implemented"],
  ["interpolation_type", "linear", "only linear sigma interpolation is implemented"],
  ["use_exponential_sigmas", false, "exponential sigmas are not implemented"],
  ["use_beta_sigmas", false, "beta sigmas are not implemented"],
  ["sigma_min", null, "a configured sigma_min is not implemented"],
  ["sigma_max", null, "a configured sigma_max is not implemented"],
  ["variance_type", null, "learned variance is not implemented"],
];

/**
 * Validates a parsed `scheduler_config.json` object.
 *
 * @throws Error naming the offending key and value when a value has the
 *   wrong type or selects behaviour that is not implemented.
 */
export function parseSchedulerConfig(raw: unknown): SchedulerConfig {
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
    throw new Error(`scheduler config must be a JSON object, got ${describe(raw)}`);
  }
  const obj = raw as Record<string, unknown>;
  const get = (key: string): unknown => (obj[key] === null ? undefined : obj[key]);

  for (const [key, allowed, what] of UNSUPPORTED) {
    const value = obj[key];
    if (value === undefined || value === null || value === allowed) continue;
    throw new Error(`scheduler config ${key}=${describe(value)}: ${what}`);
  }
  const lambdaMin = get("lambda_min_clipped");
  if (lambdaMin !== undefined && lambdaMin !== "-inf" && lambdaMin !== -Infinity) {
    throw new Error(
      `scheduler config lambda_min_clipped=${describe(lambdaMin)}: clipping is not implemented`,
    );
  }

  const num = (key: string, check: (n: number) => boolean, rule: string): number | undefined => {
    const v = get(key);
    if (v === undefined) return undefined;
    if (typeof v !== "number" || !Number.isFinite(v) || !check(v)) {
      throw new Error(`scheduler config ${key} must be ${rule}, got ${describe(v)}`);
    }
    return v;
  };
  const positive = (n: number) => n > 0;
  const posInt = (n: number) => Number.isInteger(n) && n > 0;
  const bool = (key: string): boolean | undefined => {
    const v = get(key);
    if (v === undefined) return undefined;
    if (typeof v !== "boolean") {
      throw new Error(`scheduler config ${key} must be true or false, got ${describe(v)}`);
    }
    return v;
  };
  const oneOf = <T extends string>(key: string, values: readonly T[]): T | undefined => {
    const v = get(key);
    if (v === undefined) return undefined;
    if (typeof v !== "string" || !(values as readonly string[]).includes(v)) {
      throw new Error(
        `scheduler config ${key} must be one of ${values.join(", ")}, got ${describe(v)}`,
      );
    }
    return v as T;
  };
  const str = (key: string): string | undefined => {
    const v = get(key);
    if (v === undefined) return undefined;
    if (typeof v !== "string") {
      throw new Error(`scheduler config ${key} must be a string, got ${describe(v)}`);
    }
    return v;
  };

  const config: SchedulerConfig = {
    numTrainTimesteps: num("num_train_timesteps", posInt, "a positive integer"),
    betaStart: num("beta_start", positive, "a positive number"),
    betaEnd: num("beta_end", positive, "a positive number"),
    betaSchedule: oneOf("beta_schedule", ["linear", "scaled_linear"] as const),
    stepsOffset: num("steps_offset", (n) => Number.isInteger(n) && n >= 0, "an integer >= 0"),
    setAlphaToOne: bool("set_alpha_to_one"),
    clipSample: bool("clip_sample"),
    clipSampleRange: num("clip_sample_range", positive, "a positive number"),
    predictionType: oneOf("prediction_type", ["epsilon", "v_prediction"] as const),
    timestepSpacing: oneOf("timestep_spacing", ["leading", "trailing", "linspace"] as const),
    skipPrkSteps: bool("skip_prk_steps"),
    useKarrasSigmas: bool("use_karras_sigmas"),
    originalInferenceSteps: num("original_inference_steps", posInt, "a positive integer"),
    timestepScaling: num("timestep_scaling", positive, "a positive number"),
    algorithmType: str("algorithm_type"),
    solverOrder: num("solver_order", posInt, "a positive integer"),
    solverType: str("solver_type"),
    lowerOrderFinal: bool("lower_order_final"),
    eulerAtFinal: bool("euler_at_final"),
    finalSigmasType: oneOf("final_sigmas_type", ["zero", "sigma_min"] as const),
  };
  if (
    config.betaStart !== undefined && config.betaEnd !== undefined &&
    config.betaEnd < config.betaStart
  ) {
    throw new Error(
      `scheduler config beta_end (${config.betaEnd}) must not be below beta_start (${config.betaStart})`,
    );
  }
  return config;
}

function describe(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (Array.isArray(value)) return `an array of ${value.length}`;
  if (value === null) return "null";
  if (typeof value === "object") return "an object";
  return String(value);
}
