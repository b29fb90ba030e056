/**
 * `transform_image` and `upscale_image` end to end on the tiny models, from
 * a real SDK client over real stdio and HTTP: pixel-identical results for
 * one seed twice, across a restart and across transports (inpainting too,
 * now that the VAE encoder's sample comes from the seed), PNG metadata,
 * hand-off to a job, progress over all tiles, and cancellation mid-upscale.
 */

import assert from "node:assert/strict";
import { createTestKey as createKey } from "./helpers/log_secrets.ts";
import { decodeImageInput, encodePng, readPngText, toRgbImage } from "../mod/image/mod.ts";
import type { Client } from "../mod/mcp/client_sdk.ts";
import type { RgbImage } from "../mod/pipeline/types.ts";
import { connectHttp } from "./helpers/http_client.ts";
import { openTestDatabase } from "./helpers/postgres.ts";
import { assertClientSafe, pngs, texts } from "./helpers/results.ts";
import { connectStdio } from "./helpers/stdio_server.ts";
import { writeTinyConfig } from "./helpers/tiny_config.ts";
import { startAppFromConfig } from "./helpers/app_from_config.ts";

type Result = Awaited<ReturnType<Client["callTool"]>>;

async function pixels(png: Uint8Array): Promise<Uint8Array> {
  const decoded = await decodeImageInput("input_image", png.toBase64());
  return (await toRgbImage(decoded, decoded.width, decoded.height)).data;
}

async function dataUri(width: number, height: number): Promise<string> {
  const data = new Uint8Array(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      data.set([x % 256, (y * 2) % 256, (x + 3 * y) % 256], (y * width + x) * 3);
    }
  }
  const image: RgbImage = { width, height, data };
  return `data:image/png;base64,${(await encodePng(image, {})).toBase64()}`;
}

function call(
  client: Client,
  name: string,
  args: Record<string, unknown>,
  onprogress?: () => void,
) {
  return (client.callTool({ name, arguments: args }, undefined, {
    timeout: 300_000,
    onprogress,
  }) as Promise<Result>).then((result) => {
    assertClientSafe(result, name);
    return result;
  });
}

/** One PNG from a successful call: its pixels and metadata. */
async function image(
  result: Result,
): Promise<{ pixels: Uint8Array; text: Record<string, string> }> {
  assert.equal(result.isError, undefined, texts(result));
  const [png] = pngs(result);
  return { pixels: await pixels(png), text: readPngText(png) };
}

/** The calls compared across runs. */
async function calls(client: Client) {
  const photo = await dataUri(200, 150);
  const mask = await dataUri(64, 64);
  const transform = await image(
    await call(client, "transform_image", {
      positive_prompt: "an oil painting of a harbour",
      input_image: photo,
      change: "strong",
      size: "landscape_512",
    }),
  );
  const upscale = await image(await call(client, "upscale_image", { input_image: photo }));
  const inpaint = await image(
    await call(client, "inpaint_image", {
      positive_prompt: "a boat",
      input_image: photo,
      mask_image: mask,
    }),
  );
  return { transform, upscale, inpaint };
}

Deno.test("transform, upscale and inpaint: one seed gives the same pixels twice, after a restart and over HTTP", async () => {
  const temp = await writeTinyConfig(
    `[generation]\nseed = 1234\nsteps = 3\n[controlnet.inpaint]\nenabled = true\n`,
  );
  const tdb = await openTestDatabase("image_to_image");
  try {
    const first = await connectStdio(["--config", temp.path]);
    let a, b;
    try {
      a = await calls(first.client);
      b = await calls(first.client);
    } finally {
      await first.close();
    }
    assert.equal(a.transform.text.mode, "image_to_image");
    assert.equal(a.transform.text.size, "landscape_512");
    assert.equal(a.transform.text.seed, "1234");
    assert.equal(a.upscale.text.mode, "upscale_image");
    assert.equal(a.upscale.text.size, "landscape_1024", "200×150 is closest to 4:3");
    assert.equal(a.upscale.pixels.length, 1024 * 768 * 3);
    assert.equal(a.inpaint.text.mode, "inpaint_image");
    // Each names the preset it ran, like generate_image (the tiny config's quality, 3 steps).
    for (const k of ["transform", "upscale", "inpaint"] as const) {
      const t: Record<string, string> = a[k].text;
      assert.deepEqual(
        [t.preset, t.steps, t.scheduler, t.guidance_scale, t.vae_decoder],
        ["quality", "3", "pndm", "7.5", "full"],
        k,
      );
    }
    for (const k of ["transform", "upscale", "inpaint"] as const) {
      assert.deepEqual(b[k].pixels, a[k].pixels, `${k}: twice in one process`);
    }

    const restarted = await connectStdio(["--config", temp.path]);
    try {
      const c = await calls(restarted.client);
      for (const k of ["transform", "upscale", "inpaint"] as const) {
        assert.deepEqual(c[k].pixels, a[k].pixels, `${k}: after a restart`);
      }
    } finally {
      await restarted.close();
    }

    const key = await createKey(tdb.db, { projectId: null, userId: 1, permission: "write" });
    const app = await startAppFromConfig(temp.path, tdb.url);
    try {
      const client = await connectHttp(app.http!.port, { "MCP-API-Key": key.key });
      try {
        const h = await calls(client);
        for (const k of ["transform", "upscale", "inpaint"] as const) {
          assert.deepEqual(h[k].pixels, a[k].pixels, `${k}: over HTTP`);
        }
        const other = await image(
          await call(client, "transform_image", {
            positive_prompt: "an oil painting of a harbour",
            input_image: await dataUri(200, 150),
            change: "subtle",
            size: "landscape_512",
          }),
        );
        assert.notDeepEqual(other.pixels, a.transform.pixels, "change picks another strength");
      } finally {
        await client.close();
      }
    } finally {
      await app.shutdown();
    }
  } finally {
    await tdb.close();
    await temp.remove();
  }
});

type Structured = {
  job_id?: string;
  state?: string;
  progress?: { step: number; steps: number } | null;
  generations?: Array<{ job_id: string; state: string }>;
};
const structured = (r: Result) => (r.structuredContent ?? {}) as Structured;

Deno.test("upscale_image: hands off to a job, reports progress over all tiles, stops when cancelled", async () => {
  // 20 PLMS steps at strength 1: 21 UNet calls per tile, 9 tiles, so the call outlasts 0.5 s.
  const temp = await writeTinyConfig(
    `[generation]\nseed = 5\nsteps = 20\nmax_wait_seconds = 0.5\n[upscale]\nstrength = 1.0\n`,
  );
  try {
    const session = await connectStdio(["--config", temp.path]);
    try {
      const client = session.client;
      const photo = await dataUri(64, 64);
      const totals = new Set<number>();
      const handoff = await client.callTool(
        { name: "upscale_image", arguments: { input_image: photo, positive_prompt: "a harbour" } },
        undefined,
        { timeout: 300_000, onprogress: (p) => totals.add(p.total ?? -1) },
      ) as Result;
      assert.equal(pngs(handoff).length, 0, "the call hands off");
      const id = structured(handoff).job_id!;
      assert.match(texts(handoff), /Call get_generation with job_id/);
      let done: Result | undefined;
      for (let i = 0; i < 600 && !done; i++) {
        const r = await call(client, "get_generation", { job_id: id });
        if (!["queued", "running"].includes(structured(r).state ?? "")) done = r;
      }
      const finished = await image(done!);
      assert.equal(finished.text.mode, "upscale_image");
      assert.equal(finished.text.size, "square_1024");
      assert.deepEqual([...totals], [9 * 21], "one progress total over the 9 tiles");

      // A second upscale, cancelled once it is in its second tile.
      const second = structured(
        await call(client, "upscale_image", { input_image: photo }),
      ).job_id!;
      for (let i = 0; i < 600; i++) {
        const s = structured(
          await call(client, "get_generation", { job_id: second, wait_seconds: 0.1 }),
        );
        assert.ok(s.state === "queued" || s.state === "running", `ended early: ${s.state}`);
        if ((s.progress?.step ?? 0) > 21) break;
      }
      const cancelled = await call(client, "cancel_generation", { job_id: second });
      assert.match(texts(cancelled), new RegExp(`generation ${second} was cancelled`));
      assert.equal(pngs(cancelled).length, 0);
      const listed = structured(await call(client, "list_generations", {})).generations!;
      assert.equal(listed.find((g) => g.job_id === second)?.state, "cancelled");
      const status = structured(
        await call(client, "get_generation", { job_id: second, wait_seconds: 0 }),
      );
      assert.equal(status.state, undefined, "a finished job answers with its content");
      // The server goes on serving.
      const next = await call(client, "transform_image", {
        positive_prompt: "a harbour at night",
        input_image: photo,
        change: "subtle",
      });
      assert.ok(pngs(next).length === 1 || structured(next).job_id, texts(next));
    } finally {
      await session.close();
    }
  } finally {
    await temp.remove();
  }
});
