/**
 * The image tools' own logic with a scripted engine: batch partial failure,
 * all-failed, progress across a batch, seeds without a fixed seed, and the
 * one-image result shape. (End-to-end runs on real models are in tests/.)
 */

import assert from "node:assert/strict";
import { ImageService } from "../mod/generation/mod.ts";
import { readPngText } from "../mod/image/mod.ts";
import { ToolError } from "../mod/mcp/mod.ts";
import type { Generator } from "../mod/pipeline/types.ts";
import type { JobService } from "../mod/jobs/mod.ts";
import { startMemoryJobs } from "../mod/jobs/testing.ts";
import { createGenerateGuidedImageTool } from "./generate_guided_image.ts";
import { createGenerateImageTool, generateImageArgs } from "./generate_image.ts";
import { createInpaintImageTool } from "./inpaint_image.ts";
import { createTransformImageTool } from "./transform_image.ts";
import { createUpscaleImageTool } from "./upscale_image.ts";
import { assertClientSafe } from "../tests/helpers/results.ts";
import { jobScope, scriptedGenerator, toolContext } from "../tests/helpers/tool_harness.ts";

const scope = jobScope();
const withJobs = scope.scoped;
const context = toolContext;

async function tool(generator: Generator, seed: number | null) {
  const images = new ImageService({
    generator,
    prompt: { positive: "base", negative: "" },
    defaultSize: "landscape_512",
    seed,
    output: { save: false, dir: "/nonexistent" },
  });
  const jobs = scope.track(await startMemoryJobs(images));
  return createGenerateImageTool({ images, jobs, maxCount: 5 });
}

/** An image service on `generator` at 512x512 with seed 1, saving nothing. */
function squareImages(generator: Generator): ImageService {
  return new ImageService({
    generator,
    prompt: { positive: "", negative: "" },
    defaultSize: "square_512",
    seed: 1,
    output: { save: false, dir: "/nonexistent" },
  });
}

/** generate_guided_image and inpaint_image with every ControlNet enabled. */
function guidedAndInpaint(images: ImageService, jobs: JobService) {
  const enabled = { enabled: true, model: "", conditioningScale: 1 };
  return {
    guided: createGenerateGuidedImageTool({
      images,
      jobs,
      controlnet: {
        depth: { ...enabled, preprocessor: "", preprocessorInput: "unit" },
        openpose: { ...enabled, detector: "", estimator: "" },
      },
    }),
    inpaint: createInpaintImageTool({ images, jobs, inpaint: enabled }),
  };
}

const args = (extra: Record<string, unknown>) =>
  generateImageArgs(5).parse({
    positive_prompt: "a cat",
    ...extra,
  });

Deno.test(
  "count 1 returns exactly one ImageContent",
  withJobs(async () => {
    const { generator, requests } = scriptedGenerator(() => null);
    const result = await (await tool(generator, 5)).handle(args({}), context());
    assertClientSafe(result);
    assert.equal(result.content.length, 1);
    assert.equal(result.content[0].type, "image");
    assert.equal(result.isError, undefined);
    assert.equal(requests[0].positive, "base, a cat");
    assert.deepEqual([requests[0].width, requests[0].height], [512, 384]);
  }),
);

Deno.test(
  "a failed image becomes '[i/N] failed: reason' in place and the batch goes on",
  withJobs(async () => {
    const { generator, requests } = scriptedGenerator((n) => n === 2 ? "out of luck" : null);
    const result = await (await tool(generator, 10)).handle(args({ count: 3 }), context());
    assertClientSafe(result);
    assert.equal(result.isError, undefined);
    const shape = result.content.map((c) => c.type === "text" ? c.text.slice(0, 6) : "image");
    assert.deepEqual(shape, ["[1/3] ", "image", "[2/3] ", "[3/3] ", "image"]);
    assert.equal((result.content[2] as { text: string }).text, "[2/3] failed: out of luck");
    assert.deepEqual(requests.map((r) => r.seed), [10, 11, 12]);
  }),
);

Deno.test(
  "the result is an error only when every image failed",
  withJobs(async () => {
    const { generator } = scriptedGenerator(() => "engine down");
    const result = await (await tool(generator, 1)).handle(args({ count: 2 }), context());
    assertClientSafe(result);
    assert.equal(result.isError, true);
    assert.deepEqual(
      result.content.map((c) => (c as { text: string }).text),
      ["[1/2] failed: engine down", "[2/2] failed: engine down"],
    );
  }),
);

Deno.test(
  "seeds wrap modulo 2^32 with a fixed seed, and are independent without one",
  withJobs(async () => {
    const fixed = scriptedGenerator(() => null);
    await (await tool(fixed.generator, 4294967295)).handle(args({ count: 2 }), context());
    assert.deepEqual(fixed.requests.map((r) => r.seed), [4294967295, 0]);

    const random = scriptedGenerator(() => null);
    const result = await (await tool(random.generator, null)).handle(args({ count: 3 }), context());
    assertClientSafe(result);
    const seeds = random.requests.map((r) => r.seed);
    assert.equal(new Set(seeds).size, 3, `seeds ${seeds}`);
    for (const s of seeds) assert.ok(Number.isInteger(s) && s >= 0 && s < 2 ** 32);
    const images = result.content.filter((c) => c.type === "image") as Array<{ data: string }>;
    assert.deepEqual(
      images.map((i) => readPngText(Uint8Array.fromBase64(i.data)).seed),
      seeds.map(String),
    );
  }),
);

Deno.test(
  "progress counts steps across the whole batch and only increases",
  withJobs(async () => {
    const { generator } = scriptedGenerator(() => null);
    const progress: Array<[number, number | undefined]> = [];
    await (await tool(generator, 1)).handle(args({ count: 2 }), context(progress));
    assert.deepEqual(progress, [[1, 4], [2, 4], [3, 4], [4, 4]]);
  }),
);

Deno.test("count outside 1..max_count and unknown arguments are refused by validation", () => {
  const validate = generateImageArgs(5);
  for (const count of [0, -3, 6, 2.5, "2"]) {
    const r = validate.safeParse({ positive_prompt: "a", count });
    assert.equal(r.success, false, `count ${count}`);
    assert.deepEqual(r.error!.issues[0].path, ["count"]);
  }
  const fractional = validate.safeParse({ positive_prompt: "a", count: 2.5 });
  assert.match(fractional.error!.issues[0].message, /must be a whole number from 1 to 5.*got 2\.5/);
  assert.equal(validate.parse({ positive_prompt: "a", count: null }).count, 1);
  assert.equal(validate.parse({ positive_prompt: "a", name: "x y" }).name, "x_y");
  const extra = validate.safeParse({ positive_prompt: "a", steps: 50 });
  assert.equal(extra.success, false);
  assert.equal(extra.error!.issues[0].code, "unrecognized_keys");
});

Deno.test(
  "a full queue refuses guided and inpaint calls before decoding their images",
  withJobs(async () => {
    let release!: () => void;
    const blocked = new Promise<void>((r) => release = r);
    const generator: Generator = {
      async generate(request) {
        await blocked;
        const data = new Uint8Array(request.width * request.height * 3);
        return { image: { width: request.width, height: request.height, data }, notes: [] };
      },
      close: () => Promise.resolve(),
    };
    const images = squareImages(generator);
    const jobs = scope.track(await startMemoryJobs(images, { queueLimit: 0 }));
    const running = createGenerateImageTool({ images, jobs, maxCount: 1 }).handle(
      args({}),
      context(),
    );
    const { guided, inpaint } = guidedAndInpaint(images, jobs);
    // "not base64!" would be an image error if it were decoded.
    await assert.rejects(
      guided.handle(
        guided.validate.parse({ positive_prompt: "a", control_mode: "depth", input_image: "!" }),
        context(),
      ),
      (e) => e instanceof ToolError && e.category === "busy",
    );
    await assert.rejects(
      inpaint.handle(
        inpaint.validate.parse({ positive_prompt: "a", input_image: "!", mask_image: "!" }),
        context(),
      ),
      (e) => e instanceof ToolError && e.category === "busy",
    );
    release();
    await running;
  }),
);

Deno.test(
  "the image tools' descriptions explain the hand-off to get_generation",
  withJobs(async () => {
    const images = squareImages(scriptedGenerator(() => null).generator);
    for (
      const [maxWaitMs, pattern] of [
        [
          50_000,
          /longer than this server waits \(50 s\), the call answers instead, not as an error, with a job_id.*call get_generation with that job_id/,
        ],
        [Infinity, /waits until the images are done; .*list_generations and get_generation/],
      ] as const
    ) {
      const jobs = scope.track(await startMemoryJobs(images, { maxWaitMs }));
      const { guided, inpaint } = guidedAndInpaint(images, jobs);
      const tools = [
        createGenerateImageTool({ images, jobs, maxCount: 5 }),
        guided,
        inpaint,
        createTransformImageTool({ images, jobs }),
        createUpscaleImageTool({ images, jobs }),
      ];
      for (const tool of tools) {
        assert.match(tool.description, pattern, tool.name);
        // No flat "Returns one PNG": a slow call returns a job_id instead.
        assert.doesNotMatch(tool.description, /Returns one PNG\./, tool.name);
      }
    }
  }),
);
