/**
 * `transform_image` and `upscale_image` with a scripted engine: the `change`
 * → strength mapping, sizes (the upscale size from the input's shape), PNG
 * metadata, input validation and the errors of the other image tools.
 */

import assert from "node:assert/strict";
import { ImageService } from "../mod/generation/mod.ts";
import { encodePng, readPngText } from "../mod/image/mod.ts";
import { texturedImage } from "../mod/image/testing.ts";
import { createJobImageTemplate } from "../mod/jobs/mod.ts";
import { startMemoryJobs } from "../mod/jobs/testing.ts";
import { type Scope, ToolError } from "../mod/mcp/mod.ts";
import { assertClientSafe, imageEntries } from "../tests/helpers/results.ts";
import { jobScope, scriptedGenerator, toolContext } from "../tests/helpers/tool_harness.ts";
import type { GenerationRequest, Generator, RgbImage } from "../mod/pipeline/types.ts";
import { closestUpscaleSize, createUpscaleImageTool, upscaleImageArgs } from "./upscale_image.ts";
import { createTransformImageTool, transformImageArgs } from "./transform_image.ts";

const STRENGTHS = { transform: { subtle: 0.2, moderate: 0.45, strong: 0.85 }, upscale: 0.35 };

const scope = jobScope();
const withJobs = scope.scoped;
const context = toolContext;

async function tools(strengths: typeof STRENGTHS | null = STRENGTHS) {
  const { generator, requests } = scriptedGenerator(() => null, 3);
  const images = new ImageService({
    generator,
    prompt: { positive: "base", negative: "" },
    defaultSize: "portrait_512",
    seed: 21,
    output: { save: false, dir: "/nonexistent" },
    strengths: strengths ?? undefined,
  });
  const jobs = scope.track(await startMemoryJobs(images));
  return {
    requests,
    transform: createTransformImageTool({ images, jobs }),
    upscale: createUpscaleImageTool({ images, jobs }),
  };
}

async function pngOf(width: number, height: number): Promise<string> {
  const data = new Uint8Array(width * height * 3);
  for (let i = 0; i < data.length; i++) data[i] = (i * 13) & 255;
  const image: RgbImage = { width, height, data };
  return (await encodePng(image, {})).toBase64();
}

function pngText(result: { content: Array<{ type: string }> }): Record<string, string> {
  const image = result.content.find((c) => c.type === "image") as unknown as { data: string };
  return readPngText(Uint8Array.fromBase64(image.data));
}

Deno.test(
  "transform_image: change picks the [transform] strength, null is moderate; image at the size",
  withJobs(async () => {
    const { transform, requests } = await tools();
    const input = await pngOf(300, 200);
    for (const change of ["subtle", "moderate", "strong", null, undefined]) {
      const args = transform.validate.parse({
        positive_prompt: "an oil painting",
        input_image: input,
        ...(change === undefined ? {} : { change }),
      });
      const progress: Array<[number, number | undefined]> = [];
      const result = await transform.handle(args, context(progress));
      assertClientSafe(result);
      assert.equal(result.isError, undefined);
      assert.deepEqual(progress, [[1, 3], [2, 3], [3, 3]]);
      const text = pngText(result);
      assert.equal(text.mode, "image_to_image");
      assert.equal(text.size, "portrait_512", "the configured default size");
      assert.equal(text.seed, "21");
    }
    assert.deepEqual(
      requests.map((r) => r.mode === "image_to_image" && r.strength),
      [0.2, 0.45, 0.85, 0.45, 0.45],
    );
    const r = requests[0] as Extract<GenerationRequest, { mode: "image_to_image" }>;
    assert.deepEqual([r.width, r.height, r.image.width, r.image.height], [384, 512, 384, 512]);
    assert.equal(r.positive, "base, an oil painting");
  }),
);

Deno.test("transform_image: input errors are the image tools' own", () => {
  const validate = transformImageArgs;
  const issue = (args: Record<string, unknown>) => {
    const r = validate.safeParse(args);
    assert.equal(r.success, false, JSON.stringify(args));
    return `${r.error!.issues[0].path.join(".")}: ${r.error!.issues[0].message}`;
  };
  assert.match(issue({ positive_prompt: "a" }), /^input_image: required: a base64 PNG\/JPEG/);
  assert.match(issue({ input_image: "x" }), /^positive_prompt: required/);
  assert.match(issue({ positive_prompt: "  ", input_image: "x" }), /must not be empty/);
  assert.match(
    issue({ positive_prompt: "a", input_image: "x", change: "huge" }),
    /^change: must be one of "subtle", "moderate", "strong" or null, got "huge"/,
  );
  assert.match(
    issue({ positive_prompt: "a", input_image: "x", size: "square_1024" }),
    /^size: must be one of "square_512", "landscape_512", "portrait_512" or null/,
  );
  assert.match(issue({ positive_prompt: "a", input_image: "x", strength: 1 }), /strength/);
});

Deno.test(
  "transform_image: a bad image is an image error naming input_image, before any job",
  withJobs(async () => {
    const { transform, requests } = await tools();
    for (const input_image of ["not base64!", btoa("GIF89a not a png")]) {
      await assert.rejects(
        transform.handle(
          transform.validate.parse({ positive_prompt: "a", input_image }),
          context(),
        ),
        (e) => e instanceof ToolError && e.category === "image" && /input_image/.test(e.message),
      );
    }
    assert.equal(requests.length, 0);
  }),
);

Deno.test(
  "upscale_image: 2x the size closest to the input's shape, or the size asked for",
  withJobs(async () => {
    const { upscale, requests } = await tools();
    const cases: Array<[number, number, string | null, string, number, number]> = [
      [512, 512, null, "square_1024", 1024, 1024],
      [512, 384, null, "landscape_1024", 1024, 768],
      [384, 512, null, "portrait_1024", 768, 1024],
      [640, 360, null, "landscape_1024", 1024, 768],
      [512, 384, "portrait_1024", "portrait_1024", 768, 1024],
    ];
    for (const [w, h, size, id, width, height] of cases) {
      const result = await upscale.handle(
        upscale.validate.parse({ input_image: await pngOf(w, h), size }),
        context(),
      );
      assertClientSafe(result);
      assert.equal(result.isError, undefined);
      const text = pngText(result);
      assert.equal(text.size, id, `${w}×${h}`);
      assert.equal(text.mode, "upscale_image");
      const r = requests.at(-1) as Extract<GenerationRequest, { mode: "upscale_image" }>;
      assert.deepEqual([r.width, r.height, r.image.width, r.image.height], [
        width,
        height,
        width,
        height,
      ]);
      assert.equal(r.strength, 0.35, "[upscale] strength");
      assert.equal(r.positive, "base", "no prompt: only the base prompt");
    }
    assert.equal(closestUpscaleSize(1000, 1000), "square_1024");
    assert.equal(closestUpscaleSize(1, 3), "portrait_1024");
  }),
);

Deno.test("upscale_image: validation", () => {
  const validate = upscaleImageArgs;
  const ok = validate.parse({ input_image: "x", positive_prompt: null });
  assert.equal(ok.positive_prompt, "");
  assert.equal(ok.size, null);
  assert.equal(validate.parse({ input_image: "x", positive_prompt: "" }).positive_prompt, "");
  const bad = validate.safeParse({ input_image: "x", size: "square_512" });
  assert.match(
    bad.error!.issues[0].message,
    /must be one of "square_1024", "landscape_1024", "portrait_1024" or null, got "square_512"/,
  );
  const long = validate.safeParse({ input_image: "x", positive_prompt: "a".repeat(10_001) });
  assert.match(long.error!.issues[0].message, /10001 characters long; the limit is 10000/);
  assert.match(validate.safeParse({}).error!.issues[0].message, /required: a base64 PNG\/JPEG/);
});

Deno.test(
  "without configured strengths the job fails as a configuration error",
  withJobs(async () => {
    const { transform, requests } = await tools(null);
    const result = await transform.handle(
      transform.validate.parse({ positive_prompt: "a", input_image: await pngOf(8, 8) }),
      context(),
    );
    assertClientSafe(result);
    assert.equal(result.isError, true);
    assert.match(
      JSON.stringify(result.content),
      /strengths \(\[transform\], \[upscale\]\) are not configured/,
    );
    assert.equal(requests.length, 0);
  }),
);

Deno.test(
  "an upscale past the inline budget: a preview and a resource_link to the full PNG, read back",
  withJobs(async () => {
    // An engine whose pictures are noise: the 1024x1024 PNG is ~3 MB, past any client's limit.
    const noisy: Generator = {
      generate(request) {
        const image = texturedImage(request.width, request.height, 255, request.seed);
        return Promise.resolve({ image, notes: [] });
      },
      close: () => Promise.resolve(),
    };
    const images = new ImageService({
      generator: noisy,
      prompt: { positive: "", negative: "" },
      defaultSize: "square_512",
      seed: 3,
      output: { save: false, dir: "/nonexistent" },
      strengths: STRENGTHS,
    });
    const jobs = scope.track(await startMemoryJobs(images));
    const upscale = createUpscaleImageTool({ images, jobs });
    const owner: Scope = { keyPrefix: "k", projectId: null, userId: 1, permission: "write" };
    for (const protocolVersion of ["2025-11-25", "2025-03-26"]) {
      const result = await upscale.handle(
        upscale.validate.parse({ input_image: await pngOf(512, 512) }),
        { ...context(), scope: owner, protocolVersion },
      );
      assertClientSafe(result, protocolVersion);
      const [entry] = imageEntries(result);
      assert.equal(entry.linkKind, protocolVersion === "2025-11-25" ? "resource_link" : "text");
      assert.equal(entry.image.mimeType, "image/jpeg");
      const read = await createJobImageTemplate(jobs.store, 3600).read(entry.link!, owner);
      const png = Uint8Array.fromBase64(read!.blob!);
      assert.ok(png.length > 2_000_000, `${png.length}`);
      assert.deepEqual(readPngText(png).size, "square_1024");
      assert.equal(
        await createJobImageTemplate(jobs.store, 3600).read(entry.link!, undefined),
        null,
      );
    }
  }),
);
