/**
 * What clients receive of image results, on the tiny models (real ONNX
 * Runtime): every result within the limits clients put on one (each inline
 * image at most 1 MiB decoded, the whole result under 1 MiB, short texts,
 * no image data in `structuredContent`). A result larger than the inline
 * budget comes as JPEG previews, each with a link to the full PNG, and the
 * links read back, through the job-images resource template on a real
 * store (in memory and PostgreSQL), exactly the PNGs the engine made. Over
 * real stdio with the SDK client, a batch past the default budget comes the
 * same way, and results within it come as they always did.
 */

import assert from "node:assert/strict";
import { ImageService } from "../mod/generation/mod.ts";
import { readPngText } from "../mod/image/mod.ts";
import { sharpLib as sharp } from "../mod/image/sharp.ts";
import {
  createJobImageTemplate,
  INLINE_IMAGE_BUDGET,
  jobImageUri,
  MemoryJobStore,
  parseJobImageUri,
  PostgresJobStore,
} from "../mod/jobs/mod.ts";
import { startJobs } from "../mod/jobs/testing.ts";
import type { ResourceLinkContent, Scope, ToolContext } from "../mod/mcp/mod.ts";
import { createWorkerGenerator } from "../mod/pipeline/mod.ts";
import { tinyConfig, tinyModels } from "../mod/pipeline/_testing.ts";
import { createGenerateImageTool } from "../tools/generate_image.ts";
import { createUpscaleImageTool } from "../tools/upscale_image.ts";
import { openTestDatabase } from "./helpers/postgres.ts";
import { assertClientSafe, contents, imageEntries, pngs } from "./helpers/results.ts";
import { connectStdio } from "./helpers/stdio_server.ts";
import { writeTinyConfig } from "./helpers/tiny_config.ts";

const STRENGTHS = { transform: { subtle: 0.2, moderate: 0.45, strong: 0.85 }, upscale: 0.35 };
const SCOPE: Scope = { keyPrefix: "owner", projectId: null, userId: 1, permission: "write" };

function context(protocolVersion?: string): ToolContext {
  return {
    signal: new AbortController().signal,
    scope: SCOPE,
    protocolVersion,
    progress: () => Promise.resolve(),
  };
}

/** The PNG bytes and metadata a link (or a text naming a URI) points to. */
async function readLinked(
  read: (uri: string) => Promise<{ blob?: string } | null>,
  uri: string,
): Promise<Uint8Array> {
  const contents = await read(uri);
  assert.ok(contents?.blob, `${uri} reads`);
  return Uint8Array.fromBase64(contents.blob);
}

Deno.test("tiny models: a batch and an upscale past the inline budget come as previews whose links read back the PNGs", async (t) => {
  const root = await tinyModels("image_results");
  const generator = await createWorkerGenerator({
    config: {
      ...tinyConfig(root, { generation: { steps: 2 } }),
      imageToImage: { strengths: [{ key: "upscale", value: STRENGTHS.upscale }] },
    },
  });
  const images = new ImageService({
    generator,
    prompt: { positive: "", negative: "" },
    defaultSize: "square_512",
    seed: 100,
    output: { save: false, dir: "/nonexistent" },
    strengths: STRENGTHS,
  });
  const budget = 100_000;
  const limits = { queueLimit: 4, resultTtlMs: 3_600_000, maxResultBytes: 1 << 28 };
  try {
    for (const kind of ["memory", "postgres"] as const) {
      await t.step(`${kind} store`, async () => {
        const tdb = kind === "postgres" ? await openTestDatabase("image_results") : null;
        const store = tdb ? new PostgresJobStore(tdb.db, limits) : new MemoryJobStore(limits);
        const jobs = await startJobs(images, store, { inlineImageBytes: budget });
        try {
          const template = createJobImageTemplate(jobs.store, 3600);
          const read = (uri: string) => template.read(uri, SCOPE);
          const generate = createGenerateImageTool({ images, jobs, maxCount: 4 });
          const upscale = createUpscaleImageTool({ images, jobs });

          const batch = await generate.handle(
            generate.validate.parse({ positive_prompt: "a lighthouse", count: 4 }),
            context("2025-11-25"),
          );
          assertClientSafe(batch, "batch");
          const entries = imageEntries(batch);
          assert.equal(entries.length, 4);
          assert.equal(contents(batch).length, 4 * 2 + entries.filter((e) => e.link).length);
          const fulls: Uint8Array[] = [];
          let inline = 0;
          for (const [i, entry] of entries.entries()) {
            assert.match(entry.caption ?? "", new RegExp(`^\\[${i + 1}/4\\] seed ${100 + i}, `));
            const shown = Uint8Array.fromBase64(entry.image.data!);
            inline += shown.length;
            const meta = await sharp(shown).metadata();
            assert.equal(`image/${meta.format}`, entry.image.mimeType);
            let png: Uint8Array = shown;
            if (entry.link) {
              assert.equal(entry.linkKind, "resource_link");
              const link = contents(batch).find((c) => (c as { uri?: string }).uri === entry.link);
              png = await readLinked(read, entry.link);
              assert.equal((link as ResourceLinkContent).size, png.length);
              assert.notDeepEqual(shown, png, "a preview, not the PNG");
              assert.ok(meta.width! <= 512 && meta.width === meta.height, `${meta.width}`);
            } else {
              assert.deepEqual([meta.format, meta.width], ["png", 512], "the PNG itself");
            }
            assert.equal(readPngText(png).seed, String(100 + i));
            assert.equal(readPngText(png).size, "square_512");
            fulls.push(png);
          }
          assert.ok(inline <= budget, `${inline} bytes inline`);
          // Distinct images that did not fit together: at least half of them are previews.
          assert.equal(new Set(fulls.map((p) => p.toBase64())).size, 4);
          assert.ok(fulls.reduce((n, p) => n + p.length, 0) > budget);
          const linked = entries.filter((e) => e.link);
          assert.ok(linked.length >= 2, `${linked.length} previews`);
          const jobId = parseJobImageUri(linked[0].link!)!.jobId;
          for (const [i, entry] of entries.entries()) {
            if (entry.link) assert.equal(entry.link, jobImageUri(jobId, i + 1));
          }

          // A client of an older revision gets the same previews and a text naming each URI.
          const again = await jobs.get(jobId, 0, context("2025-03-26"));
          assertClientSafe(again, "batch, 2025-03-26");
          const olderEntries = imageEntries(again);
          assert.deepEqual(
            olderEntries.map((e) => [e.link, e.linkKind]),
            entries.map((e) => [e.link, e.link ? "text" : null]),
          );
          assert.deepEqual(
            olderEntries.map((e) => e.image.data),
            entries.map((e) => e.image.data),
            "the same previews, made the same way",
          );

          const up = await upscale.handle(
            upscale.validate.parse({ input_image: fulls[0].toBase64() }),
            context("2026-07-28"),
          );
          assertClientSafe(up, "upscale");
          assert.deepEqual(contents(up).map((c) => c.type), ["image", "resource_link"]);
          const upscaled = await readLinked(read, (contents(up)[1] as ResourceLinkContent).uri);
          const upMeta = readPngText(upscaled);
          assert.equal(upMeta.mode, "upscale_image");
          assert.equal(upMeta.size, "square_1024");
          const previewed = Uint8Array.fromBase64(contents(up)[0].data!);
          assert.ok(previewed.length <= budget);
          const preview = await sharp(previewed).metadata();
          assert.equal(`image/${preview.format}`, contents(up)[0].mimeType);
          assert.ok(preview.width! <= 1024 && preview.width === preview.height);
        } finally {
          await jobs.dispose();
          await tdb?.close();
        }
      });
    }
  } finally {
    await generator.close();
  }
});

Deno.test("tiny models over stdio: results within the default budget as before, a larger batch as previews", async () => {
  const temp = await writeTinyConfig(`[generation]\nseed = 7\nsteps = 2\nmax_count = 20\n`);
  const stdio = await connectStdio(["--config", temp.path]);
  try {
    const call = (name: string, args: Record<string, unknown>) =>
      stdio.client.callTool({ name, arguments: args }, undefined, { timeout: 600_000 });
    const one = await call("generate_image", { positive_prompt: "a harbour" });
    assertClientSafe(one, "one image");
    const [png] = pngs(one);
    assert.deepEqual(contents(one).map((c) => c.type), ["image"], "exactly one PNG");
    assert.equal(readPngText(png).seed, "7");

    const up = await call("upscale_image", { input_image: png.toBase64() });
    assertClientSafe(up, "upscale");
    const [upscaled] = pngs(up);
    assert.ok(upscaled.length <= INLINE_IMAGE_BUDGET, "the tiny models' upscale fits");
    assert.deepEqual(contents(up).map((c) => c.mimeType), ["image/png"]);
    assert.equal(readPngText(upscaled).mode, "upscale_image");

    // Enough images that their PNGs pass the budget together (each is about the single one's size).
    const count = Math.min(20, Math.ceil(INLINE_IMAGE_BUDGET / png.length) + 2);
    assert.ok(count * png.length > INLINE_IMAGE_BUDGET * 1.05, `${count} x ${png.length} bytes`);
    const batch = await call("generate_image", { positive_prompt: "a harbour", count });
    assertClientSafe(batch, `batch of ${count}`);
    const entries = imageEntries(batch);
    assert.equal(entries.length, count);
    let inline = 0;
    for (const [i, entry] of entries.entries()) {
      assert.match(entry.caption ?? "", new RegExp(`^\\[${i + 1}/${count}\\] seed ${7 + i}, `));
      inline += Uint8Array.fromBase64(entry.image.data!).length;
      if (entry.link) {
        // A resource_link where the server knows the client's revision, else a text naming the URI.
        assert.deepEqual(parseJobImageUri(entry.link)?.index, i + 1);
      } else {
        assert.equal(readPngText(Uint8Array.fromBase64(entry.image.data!)).seed, String(7 + i));
      }
    }
    assert.ok(entries.filter((e) => e.link).length >= count / 2, "most are previews");
    assert.ok(inline <= INLINE_IMAGE_BUDGET, `${inline} bytes inline`);
  } finally {
    await stdio.close();
    await temp.remove();
  }
});
