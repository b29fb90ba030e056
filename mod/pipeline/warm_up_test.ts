import { deepStrictEqual, ok, strictEqual } from "node:assert";
import { type RecordedRun, recordingOpener, tinyConfig, tinyModels } from "./_testing.ts";
import { createEngine, type EngineRunOptions } from "./engine.ts";
import type { GenerationRequest } from "./types.ts";
import { warmUp, warmUpRequest } from "./warm_up.ts";

const root = await tinyModels("warm_up");

Deno.test("warmUp: one text-to-image step at the size, empty prompt, seed 0", async () => {
  const seen: Array<{ request: GenerationRequest; options?: EngineRunOptions }> = [];
  const ms = await warmUp({
    generate: (request, options) => {
      seen.push({ request, options });
      return Promise.resolve({
        image: { width: 1, height: 1, data: new Uint8Array(3) },
        notes: [],
      });
    },
  }, { width: 512, height: 384 });
  ok(Number.isInteger(ms) && ms >= 0);
  deepStrictEqual(seen, [{
    request: warmUpRequest({ width: 512, height: 384 }),
    options: { settings: { steps: 1 } },
  }]);
  deepStrictEqual(warmUpRequest({ width: 512, height: 384 }), {
    mode: "text_to_image",
    positive: "",
    negative: "",
    width: 512,
    height: 384,
    seed: 0,
  });
});

const REQUEST: GenerationRequest = {
  mode: "text_to_image",
  positive: "a lighthouse",
  negative: "fog",
  width: 64,
  height: 64,
  seed: 5,
};

for (
  const [name, set, generation] of [
    ["pndm with CFG", "sd15", { scheduler: "pndm", steps: 3, guidanceScale: 7.5 }],
    ["lcm on an LCM UNet", "sd15-lcm", { scheduler: "lcm", steps: 4, guidanceScale: 1 }],
    ["euler_a", "sd15", { scheduler: "euler_a", steps: 2, guidanceScale: 7.5 }],
  ] as const
) {
  Deno.test(`warmUp (${name}): runs every session once at the request's shapes; later images are unchanged`, async () => {
    const config = tinyConfig(root, { set, generation });
    const recording = recordingOpener();
    const warmed = await createEngine(config, {
      openSession: recording.open,
      openBytes: recording.openBytes,
    });
    const cold = await createEngine(config);
    try {
      await warmUp(warmed, { width: 64, height: 64 });
      const runs = (label: string): RecordedRun[] =>
        recording.runs.filter((r) => r.label === label);
      strictEqual(runs("text_encoder").length, 1);
      const unet = runs("unet");
      ok(unet.length >= 1 && unet.length <= 2, `one step (PNDM may call twice): ${unet.length}`);
      strictEqual(unet[0].feeds.sample.dims[2], 8, "64 px → 8 latent rows");
      strictEqual(
        unet[0].feeds.sample.dims[0],
        generation.guidanceScale > 1 && set !== "sd15-lcm" ? 2 : 1,
      );
      strictEqual(runs("vae_decoder").length, 1);
      deepStrictEqual(
        (await warmed.generate(REQUEST)).image.data,
        (await cold.generate(REQUEST)).image.data,
        "the warm-up leaves nothing behind that changes an image",
      );
    } finally {
      await warmed.release();
      await cold.release();
    }
  });
}
