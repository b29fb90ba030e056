/**
 * What a client receives of a finished job: results within the inline
 * budget unchanged; past it, the images share the budget smallest first,
 * and each that does not fit its part goes as a preview followed by a
 * `resource_link` (MCP 2025-06-18 and later) or a text naming the URI
 * (older revisions, or a client whose revision is not known); the links
 * read back, with the template, the PNGs the job stored.
 */

import assert from "node:assert/strict";
import { encodePng, readPngText } from "../image/mod.ts";
import { sharpLib as sharp } from "../image/sharp.ts";
import { texturedImage } from "../image/testing.ts";
import type { ResourceLinkContent, TextContent, ToolResult } from "../mcp/tool.ts";
import { assertClientSafe, MAX_RESULT_JSON } from "../../tests/helpers/results.ts";
import { callerOf } from "./caller.ts";
import {
  deliverResult,
  INLINE_IMAGE_BUDGET,
  planPreviews,
  RESOURCE_LINK_REVISION,
  sizeText,
  takesResourceLinks,
} from "./delivery.ts";
import { createJobImageTemplate, jobImageUri } from "./image_resource.ts";
import { newJobId } from "./job_id.ts";
import { MemoryJobStore } from "./memory_store.ts";
import { jobResult } from "./result.ts";
import type { JobItem, JobRecord } from "./types.ts";

const EXPIRES = new Date("2026-12-02T11:00:00.000Z");

const record = (over: Partial<JobRecord>): JobRecord => ({
  id: newJobId(),
  owner: "key:owner",
  project: null,
  tool: "generate_image",
  state: "succeeded",
  images: 1,
  prompt: "p",
  seq: 1,
  createdAt: new Date(0),
  startedAt: null,
  finishedAt: null,
  expiresAt: EXPIRES,
  progress: null,
  error: null,
  cancelRequested: false,
  resultBytes: 0,
  ttlMs: null,
  items: [],
  previews: [],
  ...over,
});

const image = (png: Uint8Array): JobItem => ({
  type: "image",
  data: png.toBase64(),
  mimeType: "image/png",
});

/** Photo-like PNGs (gradients under noise 60): ~100-200 KB at 256×256. */
const photo = (seed: number, width = 256, height = 256) =>
  encodePng(texturedImage(width, height, 60, seed), { seed: String(seed) });

Deno.test("MCP revisions with resource_link: 2025-06-18 and later", () => {
  assert.equal(RESOURCE_LINK_REVISION, "2025-06-18");
  for (const v of ["2025-06-18", "2025-11-25", "2026-07-28"]) assert.ok(takesResourceLinks(v), v);
  for (const v of ["2024-11-05", "2025-03-26", undefined]) {
    assert.ok(!takesResourceLinks(v), String(v));
  }
  assert.deepEqual(
    [999, 1024, 420_000, 1_572_864].map(sizeText),
    ["999 B", "1 KiB", "410 KiB", "1.5 MiB"],
  );
});

Deno.test("a result whose PNGs fit the budget goes out exactly as the job built it", async () => {
  const pngs = [await photo(1), await photo(2)];
  const job = record({
    images: 2,
    items: [
      { type: "text", text: "[1/2] seed 1, size square_512 (512x512)" },
      image(pngs[0]),
      { type: "text", text: "[2/2] seed 2, size square_512 (512x512)" },
      image(pngs[1]),
    ],
  });
  const built = jobResult(job);
  const total = pngs[0].length + pngs[1].length;
  const delivered = await deliverResult(built, job, {
    protocolVersion: "2025-11-25",
    inlineBytes: total,
  });
  assert.equal(delivered, built, "the very same result");
  // One byte less: the smaller PNG still fits its half and stays; the larger becomes a preview.
  const smaller = await deliverResult(built, job, {
    protocolVersion: "2025-11-25",
    inlineBytes: total - 1,
  });
  const larger = pngs[0].length > pngs[1].length ? 0 : 1;
  assert.notEqual(pngs[0].length, pngs[1].length);
  const types = smaller.content.map((c) => c.type);
  assert.deepEqual(
    types,
    larger === 0
      ? ["text", "image", "resource_link", "text", "image"]
      : ["text", "image", "text", "image", "resource_link"],
  );
  const kept = smaller.content.filter((c) => c.type === "image")[1 - larger];
  assert.deepEqual(kept, job.items[(1 - larger) * 2 + 1], "the PNG itself");
  const link = smaller.content.find((c) => c.type === "resource_link") as ResourceLinkContent;
  assert.equal(link.uri, jobImageUri(job.id, larger + 1));
});

Deno.test("the budget is shared smallest first: what a small PNG leaves lets a larger one stay", async () => {
  const flat = await encodePng(texturedImage(128, 128, 0, 1), {});
  const mid = await encodePng(texturedImage(512, 512, 20, 2), {});
  const big = await encodePng(texturedImage(768, 768, 60, 3), {});
  assert.ok(flat.length < mid.length && mid.length < big.length);
  // Equal thirds would not hold `mid`; half of what `flat` leaves does, with 5,000 bytes to spare.
  const budget = flat.length + 2 * mid.length + 10_000;
  assert.ok(mid.length > budget / 3 && big.length > budget - flat.length - mid.length);
  const job = record({
    images: 3,
    items: [
      { type: "text", text: "[1/3] seed 1" },
      image(big),
      { type: "text", text: "[2/3] seed 2" },
      image(flat),
      { type: "text", text: "[3/3] seed 3" },
      image(mid),
    ],
  });
  const delivered = await deliverResult(jobResult(job), job, {
    protocolVersion: "2025-11-25",
    inlineBytes: budget,
  });
  assert.deepEqual(delivered.content.map((c) => c.type), [
    "text",
    "image",
    "resource_link",
    "text",
    "image",
    "text",
    "image",
  ]);
  assert.deepEqual(delivered.content[4], job.items[3], "the flat PNG as it is");
  assert.deepEqual(delivered.content[6], job.items[5], "the middle one as it is");
  const preview = Uint8Array.fromBase64((delivered.content[1] as { data: string }).data);
  assert.ok(preview.length <= budget - flat.length - mid.length);
  assert.equal((delivered.content[2] as ResourceLinkContent).uri, jobImageUri(job.id, 1));
});

Deno.test("over the budget: previews within the budget, resource links to the PNGs", async () => {
  const pngs = [await photo(1), await photo(3), await photo(4)];
  const job = record({
    images: 4,
    state: "succeeded",
    items: [
      { type: "text", text: "[1/4] seed 1, size square_512 (512x512)" },
      image(pngs[0]),
      { type: "text", text: "[2/4] failed: out of memory" },
      { type: "text", text: "[3/4] seed 3, size square_512 (512x512)" },
      image(pngs[1]),
      { type: "text", text: "[4/4] seed 4, size square_512 (512x512)" },
      image(pngs[2]),
    ],
  });
  const budget = 60_000;
  const delivered = await deliverResult(jobResult(job), job, {
    protocolVersion: "2025-11-25",
    inlineBytes: budget,
  });
  assertClientSafe(delivered);
  assert.equal(delivered.structuredContent, undefined);
  assert.equal(delivered.isError, undefined);
  assert.deepEqual(delivered.content.map((c) => c.type), [
    "text",
    "image",
    "resource_link",
    "text",
    "text",
    "image",
    "resource_link",
    "text",
    "image",
    "resource_link",
  ]);
  // The [i/N] texts are the job's own.
  assert.deepEqual(
    delivered.content.filter((c): c is TextContent => c.type === "text").map((c) => c.text),
    job.items.filter((c): c is TextContent => c.type === "text").map((c) => c.text),
  );
  const previews = delivered.content.filter((c) => c.type === "image") as Array<
    { data: string; mimeType: string }
  >;
  let inline = 0;
  for (const preview of previews) {
    const bytes = Uint8Array.fromBase64(preview.data);
    inline += bytes.length;
    const meta = await sharp(bytes).metadata();
    assert.equal(`image/${meta.format}`, preview.mimeType);
  }
  assert.ok(inline <= budget);
  const links = delivered.content.filter((c): c is ResourceLinkContent =>
    c.type === "resource_link"
  );
  // URIs count finished images (1, 2, 3); titles name the batch positions (1, 3, 4).
  assert.deepEqual(links.map((l) => l.uri), [1, 2, 3].map((i) => jobImageUri(job.id, i)));
  assert.deepEqual(links.map((l) => l.title), [
    "Image 1 of 4, full size",
    "Image 3 of 4, full size",
    "Image 4 of 4, full size",
  ]);
  for (const [i, link] of links.entries()) {
    assert.equal(link.name, `${job.id}_${i + 1}.png`);
    assert.equal(link.mimeType, "image/png");
    assert.equal(link.size, pngs[i].length);
    assert.deepEqual(link.annotations, { audience: ["user"] });
    assert.match(
      link.description!,
      /^The image above is a \d+x\d+ (JPEG|PNG) preview \(\d+ KiB\); this is its full-size PNG \(256x256, \d+ KiB; seed and settings in its metadata\), readable with resources\/read, until 2026-12-02T11:00:00\.000Z\. /,
    );
  }
});

Deno.test("over the budget for an older or unknown MCP revision: a text names each URI", async () => {
  const png = await photo(9, 320, 240);
  const job = record({ tool: "upscale_image", items: [image(png)] });
  for (const protocolVersion of ["2024-11-05", "2025-03-26", undefined]) {
    const delivered = await deliverResult(jobResult(job), job, {
      protocolVersion,
      inlineBytes: 20_000,
    });
    assertClientSafe(delivered, String(protocolVersion));
    assert.deepEqual(delivered.content.map((c) => c.type), ["image", "text"]);
    const [preview, note] = delivered.content as [{ data: string; mimeType: string }, TextContent];
    assert.ok(Uint8Array.fromBase64(preview.data).length <= 20_000);
    assert.match(
      note.text,
      new RegExp(
        `^The image above is a \\d+x\\d+ (JPEG|PNG) preview \\(\\d+ KiB\\)\\. Full-size PNG \\(320x240, ` +
          `\\d+ KiB; seed and settings in its metadata\\): resources/read ` +
          `${jobImageUri(job.id, 1)}, until 2026-12-02T11:00:00\\.000Z\\.$`,
      ),
    );
  }
  // 2026-07-28 clients get the link; the title of a one-image result says what it is.
  const current = await deliverResult(jobResult(job), job, {
    protocolVersion: "2026-07-28",
    inlineBytes: 20_000,
  });
  assert.deepEqual(current.content.map((c) => c.type), ["image", "resource_link"]);
  assert.equal((current.content[1] as ResourceLinkContent).title, "Full-size image");
});

Deno.test("the default budget keeps a 1024x1024 noise upscale and a 10-image batch under 1 MiB", async () => {
  // Pure noise is the worst case for PNG and JPEG alike.
  const upscale = await encodePng(texturedImage(1024, 1024, 255, 5), { mode: "upscale_image" });
  assert.ok(upscale.length > 2_000_000, `${upscale.length}`);
  const job = record({ tool: "upscale_image", items: [image(upscale)] });
  const built = jobResult(job);
  assert.ok(JSON.stringify(built).length > MAX_RESULT_JSON, "as built, it would not do");
  const delivered = await deliverResult(built, job, { protocolVersion: "2025-11-25" });
  assertClientSafe(delivered);
  const inline = Uint8Array.fromBase64((delivered.content[0] as { data: string }).data);
  assert.ok(inline.length <= INLINE_IMAGE_BUDGET);

  const batch: JobItem[] = [];
  for (let i = 1; i <= 10; i++) {
    batch.push({ type: "text", text: `[${i}/10] seed ${i}, size square_512 (512x512)` });
    batch.push(image(await encodePng(texturedImage(512, 512, 255, i), {})));
  }
  const ten = record({ images: 10, items: batch });
  const tenDelivered = await deliverResult(jobResult(ten), ten, { protocolVersion: "2025-11-25" });
  assertClientSafe(tenDelivered);
  assert.equal(tenDelivered.content.filter((c) => c.type === "resource_link").length, 10);
});

Deno.test("a link reads back the job's own PNG through the template", async () => {
  const store = new MemoryJobStore({ queueLimit: 4, resultTtlMs: 60_000, maxResultBytes: 1 << 28 });
  try {
    const scope = { keyPrefix: "owner", projectId: null, userId: 1, permission: "write" as const };
    const id = newJobId();
    await store.create({
      id,
      ...callerOf(scope),
      request: {
        tool: "upscale_image",
        mode: "text_to_image",
        positive: "p",
        negative: "",
        size: "square_1024",
        name: null,
        seeds: [5],
        receivedAt: 0,
      },
    });
    const { claim } = (await store.claim("w"))!;
    const png = await encodePng(texturedImage(512, 512, 90, 5), {
      seed: "5",
      mode: "upscale_image",
    });
    await store.append(claim, 0, [image(png)]);
    await store.finish(claim, { state: "succeeded", error: null });
    const job = await store.get(id, callerOf(scope));
    const delivered: ToolResult = await deliverResult(jobResult(job!), job!, {
      protocolVersion: "2025-06-18",
      inlineBytes: 50_000,
    });
    const link = delivered.content[1] as ResourceLinkContent;
    assert.match(link.description!, /until \d{4}-\d\d-\d\dT/, "the store's expiry is named");
    const read = await createJobImageTemplate(store, 60).read(link.uri, scope);
    const full = Uint8Array.fromBase64(read!.blob!);
    assert.deepEqual(full, png);
    assert.deepEqual(readPngText(full), { seed: "5", mode: "upscale_image" });
  } finally {
    await store.close();
  }
});

Deno.test("previews planned once at the end are what every delivery sends: no PNG is read or encoded again", async () => {
  const pngs = [await photo(3), await photo(4)];
  const items = [image(pngs[0]), image(pngs[1])];
  const budget = Math.floor((pngs[0].length + pngs[1].length) / 3);
  const previews = await planPreviews(
    items.filter((i) => i.type === "image") as Array<Extract<JobItem, { type: "image" }>>,
    budget,
  );
  assert.equal(previews.length, 2, "both are over their share");
  const made = record({ images: 2, items });
  const fresh = await deliverResult(jobResult(made), made, {
    protocolVersion: "2025-11-25",
    inlineBytes: budget,
  });
  // The stored ones, with the PNGs' data left out (as a delivery read leaves it): the same result.
  const blank = items.map((i) => ({ ...i, data: "" })) as JobItem[];
  const job = { ...made, items: blank, previews };
  const stored = await deliverResult(jobResult(job), job, {
    protocolVersion: "2025-11-25",
    inlineBytes: budget,
  });
  assert.deepEqual(stored, fresh);
  assert.equal(
    stored.content.filter((c) => c.type === "image").map((c) => (c as { data: string }).data)
      .join(),
    previews.map((p) => p.data).join(),
  );
});
