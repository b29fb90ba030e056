import { deepStrictEqual, strictEqual, throws } from "node:assert";
import { parseSchedulerConfig } from "./scheduler_config.ts";
import { SD15_CONFIG } from "./testdata/reference.ts";

Deno.test("config: the SD 1.5 scheduler_config.json parses; absent keys stay undefined", () => {
  const c = parseSchedulerConfig(SD15_CONFIG);
  strictEqual(c.numTrainTimesteps, 1000);
  strictEqual(c.betaStart, 0.00085);
  strictEqual(c.betaEnd, 0.012);
  strictEqual(c.betaSchedule, "scaled_linear");
  strictEqual(c.stepsOffset, 1);
  strictEqual(c.setAlphaToOne, false);
  strictEqual(c.clipSample, false);
  strictEqual(c.skipPrkSteps, true);
  strictEqual(c.timestepSpacing, undefined);
  strictEqual(c.predictionType, undefined);
  strictEqual(c.useKarrasSigmas, undefined);
});

Deno.test("config: newer keys and nulls", () => {
  const c = parseSchedulerConfig({
    ...SD15_CONFIG,
    timestep_spacing: "trailing",
    prediction_type: "v_prediction",
    use_karras_sigmas: true,
    final_sigmas_type: "sigma_min",
    lambda_min_clipped: "-inf",
    sigma_min: null,
    thresholding: false,
    original_inference_steps: 50,
  });
  deepStrictEqual(
    [
      c.timestepSpacing,
      c.predictionType,
      c.useKarrasSigmas,
      c.finalSigmasType,
      c.originalInferenceSteps,
    ],
    ["trailing", "v_prediction", true, "sigma_min", 50],
  );
});

Deno.test("config: wrong types and unsupported features are named in the error", () => {
  throws(() => parseSchedulerConfig(null), /must be a JSON object, got null/);
  throws(() => parseSchedulerConfig([1]), /must be a JSON object, got an array of 1/);
  throws(
    () => parseSchedulerConfig({ trained_betas: [0.1, 0.2] }),
    /trained_betas=an array of 2: explicit trained_betas are not supported/,
  );
  throws(() => parseSchedulerConfig({ thresholding: true }), /thresholding=true/);
  throws(() => parseSchedulerConfig({ rescale_betas_zero_snr: true }), /rescale_betas_zero_snr/);
  throws(
    () => parseSchedulerConfig({ beta_start: "0.1" }),
    /beta_start must be a positive number, got "0\.1"/,
  );
  throws(
    () => parseSchedulerConfig({ num_train_timesteps: 10.5 }),
    /num_train_timesteps must be a positive integer, got 10\.5/,
  );
  throws(
    () => parseSchedulerConfig({ beta_schedule: "squaredcos_cap_v2" }),
    /beta_schedule must be one of linear, scaled_linear, got "squaredcos_cap_v2"/,
  );
  throws(
    () => parseSchedulerConfig({ prediction_type: "sample" }),
    /prediction_type must be one of/,
  );
  throws(
    () => parseSchedulerConfig({ timestep_spacing: "even" }),
    /timestep_spacing must be one of/,
  );
  throws(
    () => parseSchedulerConfig({ steps_offset: -1 }),
    /steps_offset must be an integer >= 0, got -1/,
  );
  throws(() => parseSchedulerConfig({ clip_sample: "no" }), /clip_sample must be true or false/);
  throws(
    () => parseSchedulerConfig({ beta_start: 0.02, beta_end: 0.01 }),
    /beta_end \(0\.01\) must not be below beta_start \(0\.02\)/,
  );
  throws(() => parseSchedulerConfig({ lambda_min_clipped: -5.1 }), /lambda_min_clipped=-5\.1/);
  throws(() => parseSchedulerConfig({ timestep_type: "continuous" }), /timestep_type="continuous"/);
});
