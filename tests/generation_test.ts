/**
 * The three image tools end to end on the tiny models: determinism across
 * transports, name/count batches with saving, guided and inpaint modes, and
 * their error cases.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { createTestKey as createKey } from "./helpers/log_secrets.ts";
import { decodeImageInput, encodePng, readPngText, toRgbImage } from "../mod/image/mod.ts";
import type { RgbImage } from "../mod/pipeline/types.ts";
import { connectHttp } from "./helpers/http_client.ts";
import { openTestDatabase } from "./helpers/postgres.ts";
import { assertClientSafe, pngs, texts } from "./helpers/results.ts";
import { connectStdio } from "./helpers/stdio_server.ts";
import { writeTinyConfig } from "./helpers/tiny_config.ts";
import { startAppFromConfig } from "./helpers/app_from_config.ts";

async function pixels(png: Uint8Array): Promise<Uint8Array> {
  const decoded = await decodeImageInput("input_image", png.toBase64());
  return (await toRgbImage(decoded, decoded.width, decoded.height)).data;
}

function image(width: number, height: number, paint: (x: number, y: number) => number[]): RgbImage {
  const data = new Uint8Array(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) data.set(paint(x, y), (y * width + x) * 3);
  }
  return { width, height, data };
}

async function dataUri(img: RgbImage): Promise<string> {
  return `data:image/png;base64,${(await encodePng(img, {})).toBase64()}`;
}

/** A bright figure on black: the tiny pose detector finds a person in bright regions. */
const personPhoto = () =>
  image(256, 256, (x, y) => (x > 96 && x < 160 && y > 40 && y < 230) ? [230, 200, 180] : [0, 0, 0]);

Deno.test("a fixed seed gives identical pixels over stdio and HTTP; batches use seed + i", async () => {
  const temp = await writeTinyConfig(`[generation]\nseed = 1234\nsteps = 3\nmax_count = 4\n`);
  const tdb = await openTestDatabase("determinism");
  try {
    const stdio = await connectStdio(["--config", temp.path]);
    let viaStdio: Uint8Array;
    let batch: unknown;
    try {
      const one = await stdio.client.callTool({
        name: "generate_image",
        arguments: { positive_prompt: "a blue bird", size: "square_512" },
      });
      [viaStdio] = pngs(one);
      assert.equal(readPngText(viaStdio).seed, "1234");
      batch = await stdio.client.callTool({
        name: "generate_image",
        arguments: { positive_prompt: "a blue bird", size: "square_512", count: 3 },
      });
    } finally {
      await stdio.close();
    }

    const key = await createKey(tdb.db, { projectId: null, userId: 1, permission: "write" });
    const app = await startAppFromConfig(temp.path, tdb.url);
    let viaHttp: Uint8Array;
    let otherPrompt: Uint8Array;
    try {
      const client = await connectHttp(app.http!.port, { "MCP-API-Key": key.key });
      try {
        [viaHttp] = pngs(
          await client.callTool({
            name: "generate_image",
            arguments: { positive_prompt: "a blue bird", size: "square_512" },
          }),
        );
        [otherPrompt] = pngs(
          await client.callTool({
            name: "generate_image",
            arguments: { positive_prompt: "a red car", size: "square_512" },
          }),
        );
      } finally {
        await client.close();
      }
    } finally {
      await app.shutdown();
    }
    assert.deepEqual(await pixels(viaHttp), await pixels(viaStdio));
    assert.notDeepEqual(await pixels(otherPrompt), await pixels(viaStdio));

    // count = 3: [Text, Image] × 3, seeds 1234, 1235, 1236; image 1 equals the single call.
    // Three 512x512 PNGs fit within the inline budget together: the batch is exactly the contract's.
    assertClientSafe(batch, "batch");
    const items = (batch as { content: Array<{ type: string; text?: string }> }).content;
    assert.deepEqual(items.map((c) => c.type), ["text", "image", "text", "image", "text", "image"]);
    const batchPngs = pngs(batch);
    for (let i = 0; i < 3; i++) {
      assert.match(
        items[2 * i].text!,
        new RegExp(
          `^\\[${i + 1}/3\\] seed ${1234 + i}, size square_512 \\(512x512\\), ` +
            `quality preset \\(pndm, 3 steps, guidance 7\\.5, full VAE\\)`,
        ),
      );
      assert.equal(readPngText(batchPngs[i]).seed, String(1234 + i));
    }
    assert.deepEqual(await pixels(batchPngs[0]), await pixels(viaStdio));
    assert.notDeepEqual(await pixels(batchPngs[1]), await pixels(batchPngs[0]));
  } finally {
    await tdb.close();
    await temp.remove();
  }
});

Deno.test("saving: name prefix, never overwriting, file named in the batch text", async () => {
  const temp = await writeTinyConfig(
    `[generation]\nseed = 7\nsteps = 2\n[output]\nsave = true\ndir = "saved"\n`,
  );
  try {
    const session = await connectStdio(["--config", temp.path]);
    try {
      const single = await session.client.callTool({
        name: "generate_image",
        arguments: { positive_prompt: "a fox", name: "my fox!" },
      });
      assert.equal(single.isError, undefined, texts(single));
      const batch = await session.client.callTool({
        name: "generate_image",
        arguments: { positive_prompt: "a fox", name: "my fox!", count: 2 },
      });
      const files = [];
      for await (const entry of Deno.readDir(join(temp.dir, "saved"))) files.push(entry.name);
      files.sort();
      assert.equal(files.length, 3, files.join(", "));
      for (const f of files) assert.match(f, /^my_fox__\d{8}_\d{6}_(7|8)(-\d+)?\.png$/);
      // Seed 7 was generated twice (single + batch image 1): two distinct files.
      assert.equal(files.filter((f) => /_7(-\d+)?\.png$/.test(f)).length, 2);
      // Named by the setting, not the server's absolute path.
      assert.match(
        texts(batch),
        /\[1\/2\] seed 7, .*saved to output\.dir\/my_fox__\d{8}_\d{6}_7(-\d+)?\.png/,
      );
      assert.ok(!texts(batch).includes(temp.dir), texts(batch));
      const saved = await Deno.readFile(join(temp.dir, "saved", files[0]));
      assert.equal(readPngText(saved).mode, "text_to_image");
    } finally {
      await session.close();
    }
  } finally {
    await temp.remove();
  }
});

Deno.test("a saving failure is a tool error and returns no image", async () => {
  const temp = await writeTinyConfig(
    `[generation]\nsteps = 2\n[output]\nsave = true\ndir = "blocked/out"\n`,
  );
  try {
    await Deno.writeTextFile(join(temp.dir, "blocked"), "a file where a folder should be");
    const session = await connectStdio(["--config", temp.path]);
    try {
      const result = await session.client.callTool({
        name: "generate_image",
        arguments: { positive_prompt: "a fox" },
      });
      assert.equal(result.isError, true);
      assert.equal(pngs(result).length, 0);
      assert.match(texts(result), /cannot create the output directory \(output\.dir\)/);
      assert.ok(!texts(result).includes(temp.dir), `an absolute path reached the model`);
    } finally {
      await session.close();
    }
  } finally {
    await temp.remove();
  }
});

Deno.test("guided (depth, openpose, openpose_full) and inpaint return PNGs with their mode", async (t) => {
  const temp = await writeTinyConfig(
    `[generation]\nseed = 99\nsteps = 2\n[controlnet.depth]\nenabled = true\n` +
      `[controlnet.openpose]\nenabled = true\n[controlnet.inpaint]\nenabled = true\n`,
  );
  try {
    const session = await connectStdio(["--config", temp.path]);
    const call = (name: string, args: Record<string, unknown>) =>
      session.client.callTool({ name, arguments: args }, undefined, { timeout: 120_000 });
    try {
      const photo = await dataUri(personPhoto());
      for (const mode of ["depth", "openpose", "openpose_full"]) {
        await t.step(`generate_guided_image ${mode}`, async () => {
          const result = await call("generate_guided_image", {
            positive_prompt: "a dancer",
            control_mode: mode,
            input_image: photo,
            size: "portrait_512",
          });
          assert.equal(result.isError, undefined, texts(result));
          const [png] = pngs(result);
          assert.equal(readPngText(png).mode, "guided_image");
          assert.equal(readPngText(png).size, "portrait_512");
        });
      }

      await t.step("no person in the image is a tool error that says so", async () => {
        const black = await dataUri(image(128, 128, () => [0, 0, 0]));
        const result = await call("generate_guided_image", {
          positive_prompt: "a dancer",
          control_mode: "openpose",
          input_image: black,
        });
        assert.equal(result.isError, true);
        assert.match(texts(result), /no person found in input_image/);
      });

      await t.step(
        "inpaint keeps black mask areas and accepts a mask of another size",
        async () => {
          const source = image(512, 512, (x, y) => [x % 256, y % 256, (x + y) % 256]);
          // 64×64 mask: the right half is white (regenerate); it is resized, not rejected.
          const mask = image(64, 64, (x) => x >= 32 ? [255, 255, 255] : [0, 0, 0]);
          const result = await call("inpaint_image", {
            positive_prompt: "a vase",
            input_image: await dataUri(source),
            mask_image: await dataUri(mask),
            size: "square_512",
          });
          assert.equal(result.isError, undefined, texts(result));
          const [png] = pngs(result);
          assert.equal(readPngText(png).mode, "inpaint_image");
          const out = await pixels(png);
          let keptEqual = true;
          let changed = 0;
          for (let y = 0; y < 512; y++) {
            for (let x = 0; x < 512; x++) {
              const i = (y * 512 + x) * 3;
              const same = out[i] === source.data[i] && out[i + 1] === source.data[i + 1] &&
                out[i + 2] === source.data[i + 2];
              if (x < 256 && !same) keptEqual = false;
              if (x >= 256 && !same) changed++;
            }
          }
          assert.ok(keptEqual, "a pixel under black mask changed");
          assert.ok(changed > 256 * 512 / 2, `only ${changed} masked pixels changed`);
        },
      );

      await t.step("an all-black mask is refused: nothing to regenerate", async () => {
        const result = await call("inpaint_image", {
          positive_prompt: "a vase",
          input_image: photo,
          mask_image: await dataUri(image(32, 32, () => [10, 10, 10])),
        });
        assert.equal(result.isError, true);
        assert.match(texts(result), /mask_image has no pixel brighter than 50%/);
      });
    } finally {
      await session.close();
    }
  } finally {
    await temp.remove();
  }
});

Deno.test("a disabled ControlNet is a tool error naming its config key", async () => {
  const temp = await writeTinyConfig(`[generation]\nsteps = 2\n`);
  try {
    const session = await connectStdio(["--config", temp.path]);
    try {
      const photo = await dataUri(personPhoto());
      const guided = await session.client.callTool({
        name: "generate_guided_image",
        arguments: {
          positive_prompt: "a dancer",
          control_mode: "openpose_full",
          input_image: photo,
        },
      });
      assert.equal(guided.isError, true);
      assert.match(texts(guided), /controlnet\.openpose\.enabled = false/);
      const inpaint = await session.client.callTool({
        name: "inpaint_image",
        arguments: { positive_prompt: "a vase", input_image: photo, mask_image: photo },
      });
      assert.equal(inpaint.isError, true);
      assert.match(texts(inpaint), /controlnet\.inpaint\.enabled = false/);
    } finally {
      await session.close();
    }
  } finally {
    await temp.remove();
  }
});
