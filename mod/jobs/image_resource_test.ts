/**
 * The job-images resource template, read directly against both job stores
 * (in memory, and a real PostgreSQL: DATABASE_URL, else the embedded
 * default): who may read an image (the key that made the job, a key of its
 * project, the stdio process for its own), and that everything else (another
 * key, an expired or trimmed job, a malformed URI, an index past the last
 * image) reads as not found.
 */

import assert from "node:assert/strict";
import type { ImageRequest } from "../generation/request.ts";
import { encodePng } from "../image/mod.ts";
import { texturedImage } from "../image/testing.ts";
import type { Scope } from "../mcp/tool.ts";
import { openTestDatabase } from "../../tests/helpers/postgres.ts";
import { callerOf } from "./caller.ts";
import {
  createJobImageTemplate,
  JOB_IMAGE_URI_TEMPLATE,
  jobImageUri,
  parseJobImageUri,
} from "./image_resource.ts";
import { newJobId } from "./job_id.ts";
import { MemoryJobStore } from "./memory_store.ts";
import { PostgresJobStore } from "./postgres_store.ts";
import type { JobItem, JobStore, StoreLimits } from "./types.ts";

const request = (seeds: number[]): ImageRequest => ({
  tool: "generate_image",
  mode: "text_to_image",
  positive: "a lighthouse",
  negative: "",
  size: "square_512",
  name: null,
  seeds,
  receivedAt: 1_700_000_000_000,
});

const key = (keyPrefix: string, projectId: number | null = null): Scope => ({
  keyPrefix,
  projectId,
  userId: 1,
  permission: "write",
});

const LIMITS: StoreLimits = {
  queueLimit: 10,
  resultTtlMs: 3_600_000,
  maxResultBytes: 64 * 1024 * 1024,
};

type Open = (limits: StoreLimits) => Promise<{ store: JobStore; close(): Promise<void> }>;

const stores: Array<[string, Open]> = [
  ["memory", (limits) => {
    const store = new MemoryJobStore(limits);
    return Promise.resolve({ store, close: () => store.close() });
  }],
  ["postgres", async (limits) => {
    const tdb = await openTestDatabase("job_images");
    const store = new PostgresJobStore(tdb.db, limits);
    return {
      store,
      async close() {
        await store.close();
        await tdb.close();
      },
    };
  }],
];

/** Two distinct PNGs, as a batch of two stores them. */
async function pngs(): Promise<Uint8Array[]> {
  return [
    await encodePng(texturedImage(64, 48, 40, 1), { seed: "11" }),
    await encodePng(texturedImage(64, 48, 40, 2), { seed: "12" }),
  ];
}

/** Runs a job of `scope`'s caller to the end with `items`; returns its id. */
async function finishedJob(
  store: JobStore,
  scope: Scope | undefined,
  items: JobItem[],
  seeds = [11, 12, 13],
): Promise<string> {
  const id = newJobId();
  await store.create({ id, ...callerOf(scope), request: request(seeds) });
  let claimed = await store.claim("w");
  while (claimed && claimed.id !== id) claimed = await store.claim("w");
  assert.equal(claimed?.id, id);
  await store.append(claimed!.claim, 0, items);
  await store.finish(claimed!.claim, { state: "succeeded", error: null });
  return id;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

Deno.test("job image URIs: built and parsed, anything else refused", () => {
  const id = newJobId();
  assert.equal(jobImageUri(id, 3), `generation://jobs/${id}/images/3`);
  assert.deepEqual(parseJobImageUri(jobImageUri(id, 3)), { jobId: id, index: 3 });
  assert.equal(
    JOB_IMAGE_URI_TEMPLATE.replace("{job_id}", id).replace("{index}", "3"),
    jobImageUri(id, 3),
  );
  for (
    const bad of [
      `generation://jobs/${id}/images/0`,
      `generation://jobs/${id}/images/01`,
      `generation://jobs/${id}/images/-1`,
      `generation://jobs/${id}/images/1/`,
      `generation://jobs/${id}/images/1?x=1`,
      `generation://jobs/${id}/image/1`,
      `generation://${id}/images/1`,
      `generation://jobs/gen_short/images/1`,
      `generation://jobs/${id.toUpperCase()}x/images/1`,
      `file:///jobs/${id}/images/1`,
      "",
    ]
  ) {
    assert.equal(parseJobImageUri(bad), null, bad);
  }
});

for (const [kind, open] of stores) {
  Deno.test(`${kind} store: a job's images are read by its key and its project, by no one else`, async () => {
    const { store, close } = await open(LIMITS);
    try {
      const [first, second] = await pngs();
      const owner = key("owner", 7);
      const id = await finishedJob(store, owner, [
        { type: "text", text: "[1/3] seed 11, size square_512 (512x512)" },
        { type: "image", data: first.toBase64(), mimeType: "image/png" },
        { type: "text", text: "[2/3] failed: out of memory" },
        { type: "text", text: "[3/3] seed 13, size square_512 (512x512)" },
        { type: "image", data: second.toBase64(), mimeType: "image/png" },
      ]);
      const template = createJobImageTemplate(store, 3600);
      assert.equal(template.uriTemplate, JOB_IMAGE_URI_TEMPLATE);
      assert.equal(template.mimeType, "image/png");
      assert.match(template.description ?? "", /for 3600 s after the job ends/);

      // Images count in result order, past the failed one: 2 is the batch's third image.
      for (const [index, png] of [[1, first], [2, second]] as const) {
        const uri = jobImageUri(id, index);
        for (const reader of [owner, key("teammate", 7)]) {
          const read = await template.read(uri, reader);
          assert.ok(read, `${reader.keyPrefix} reads image ${index}`);
          assert.equal(read.uri, uri);
          assert.equal(read.mimeType, "image/png");
          assert.deepEqual(Uint8Array.fromBase64(read.blob!), png);
          assert.equal(read.text, undefined);
        }
      }
      // Not found, all alike: another key, another project, stdio, no such image or job.
      assert.equal(await template.read(jobImageUri(id, 1), key("stranger")), null);
      assert.equal(await template.read(jobImageUri(id, 1), key("other project", 8)), null);
      assert.equal(await template.read(jobImageUri(id, 1), undefined), null);
      assert.equal(await template.read(jobImageUri(id, 3), owner), null);
      assert.equal(await template.read(jobImageUri(newJobId(), 1), owner), null);
      assert.equal(await template.read(`generation://jobs/${id}/images/x`, owner), null);
      assert.equal(await template.read(`ui://generation/jobs/${id}/images/1`, owner), null);

      // Over stdio the process reads its own jobs and no key's.
      const own = await finishedJob(store, undefined, [
        { type: "image", data: first.toBase64(), mimeType: "image/png" },
      ], [5]);
      const mine = await template.read(jobImageUri(own, 1), undefined);
      assert.deepEqual(Uint8Array.fromBase64(mine!.blob!), first);
      assert.equal(await template.read(jobImageUri(own, 1), owner), null);
    } finally {
      await close();
    }
  });

  Deno.test(`${kind} store: a finished image of a running batch is readable; expired and trimmed jobs are not found`, async () => {
    const [first, second] = await pngs();
    const short = await open({ queueLimit: 10, resultTtlMs: 300, maxResultBytes: 1 << 30 });
    try {
      const owner = key("owner");
      const template = createJobImageTemplate(short.store, 0.3);
      const id = newJobId();
      await short.store.create({ id, ...callerOf(owner), request: request([1, 2]) });
      const claimed = await short.store.claim("w");
      assert.equal(claimed?.id, id);
      await short.store.append(claimed!.claim, 0, [
        { type: "text", text: "[1/2] seed 1" },
        { type: "image", data: first.toBase64(), mimeType: "image/png" },
      ]);
      // Still running: the first image is there, the second not yet.
      assert.ok(await template.read(jobImageUri(id, 1), owner));
      assert.equal(await template.read(jobImageUri(id, 2), owner), null);
      await short.store.finish(claimed!.claim, { state: "cancelled", error: null });
      assert.ok(await template.read(jobImageUri(id, 1), owner), "kept after the job ends");
      await sleep(450);
      // Past [jobs] result_ttl_seconds: not found, before and after the purge.
      assert.equal(await template.read(jobImageUri(id, 1), owner), null);
      await short.store.purgeExpired();
      assert.equal(await template.read(jobImageUri(id, 1), owner), null);
    } finally {
      await short.close();
    }

    // [jobs] max_result_mib: a newer result pushes the older one out, and its link with it.
    const imageBytes = Math.max(first.toBase64().length, second.toBase64().length);
    const capped = await open({
      queueLimit: 10,
      resultTtlMs: 3_600_000,
      maxResultBytes: imageBytes,
    });
    try {
      const owner = key("owner");
      const template = createJobImageTemplate(capped.store, 3600);
      const older = await finishedJob(capped.store, owner, [
        { type: "image", data: first.toBase64(), mimeType: "image/png" },
      ], [1]);
      assert.ok(await template.read(jobImageUri(older, 1), owner));
      const newer = await finishedJob(capped.store, owner, [
        { type: "image", data: second.toBase64(), mimeType: "image/png" },
      ], [2]);
      assert.equal(await template.read(jobImageUri(older, 1), owner), null);
      const kept = await template.read(jobImageUri(newer, 1), owner);
      assert.deepEqual(Uint8Array.fromBase64(kept!.blob!), second);
    } finally {
      await capped.close();
    }
  });
}
